package docs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/testenv"
)

// readmeBlocks returns the README's fenced blocks of one language.
func readmeBlocks(t *testing.T, lang string) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)```"+lang+"\n(.*?)```").FindAllStringSubmatch(string(b), -1) {
		out = append(out, m[1])
	}
	return out
}

// zeroConfig starts the README's zero-config gateway in-process and returns
// its URL and client key.
func zeroConfig(t *testing.T) (string, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.New(ctx, server.Options{Dir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for _, g := range srv.Generated() {
		if g.Name == "client" {
			return srv.URL(), g.Secret
		}
	}
	t.Fatal("the zero-config gateway made no client key")
	return "", ""
}

// TestReadmeGoSnippets compiles the README's Go snippets (openai-go,
// anthropic-sdk-go, google.golang.org/genai: the module's go.mod requires
// all three for its tests) into programs and runs them against the
// zero-config gateway: each must stream text.
func TestReadmeGoSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two programs (-short)")
	}
	url, key := zeroConfig(t)
	imports := map[string]string{
		"openai.":    `"github.com/openai/openai-go/v3"` + "\n\t" + `"github.com/openai/openai-go/v3/option"`,
		"anthropic.": `"github.com/anthropics/anthropic-sdk-go/v2"` + "\n\t" + `"github.com/anthropics/anthropic-sdk-go/v2/option"`,
		"genai.":     `"google.golang.org/genai"`,
	}
	// What each program does after the snippet: the OpenAI and Anthropic
	// streams report their error at the end; genai's iterator hands each
	// error to the loop, which prints nothing for it (the output's length
	// is checked).
	tails := map[string]string{
		"openai.":    "\tif err := stream.Err(); err != nil {\n\t\tfmt.Fprintln(os.Stderr, err)\n\t\tos.Exit(1)\n\t}\n",
		"anthropic.": "\tif err := stream.Err(); err != nil {\n\t\tfmt.Fprintln(os.Stderr, err)\n\t\tos.Exit(1)\n\t}\n",
		"genai.":     "\tfmt.Println()\n",
	}
	ran := 0
	for _, snippet := range readmeBlocks(t, "go") {
		sdk := ""
		for prefix := range imports {
			if strings.Contains(snippet, prefix+"NewClient(") {
				sdk = prefix
			}
		}
		if sdk == "" {
			t.Errorf("a Go snippet for no known SDK:\n%s", snippet)
			continue
		}
		t.Run(strings.TrimSuffix(sdk, "."), func(t *testing.T) {
			dir := t.TempDir()
			prog := "package main\n\nimport (\n\t\"context\"\n\t\"fmt\"\n\t\"os\"\n\n\t" + imports[sdk] + "\n)\n\n" +
				"func main() {\n\tctx := context.Background()\n" +
				strings.ReplaceAll(snippet, "http://127.0.0.1:8080", url) + tails[sdk] + "}\n"
			src := filepath.Join(dir, "main.go")
			os.WriteFile(src, []byte(prog), 0o644)
			build := exec.Command("go", "build", "-o", filepath.Join(dir, "snippet"), src)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("the README's snippet does not compile: %v\n%s\n%s", err, out, prog)
			}
			cmd := exec.Command(filepath.Join(dir, "snippet"))
			cmd.Env = append(os.Environ(), "TTFX_CLIENT_KEY="+key)
			out, err := cmd.CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) < 10 {
				t.Fatalf("the README's snippet: %v\n%s", err, out)
			}
			t.Logf("streamed: %.80q", out)
		})
		ran++
	}
	if ran != 3 {
		t.Errorf("ran %d Go snippets, want the OpenAI, the Anthropic and the Gemini one", ran)
	}
}

// TestReadmeNodeSnippets runs the README's three Node snippets (openai,
// @anthropic-ai/sdk, @google/genai, as testdata/sdk-node pins them) against
// the zero-config gateway: each must stream text.
func TestReadmeNodeSnippets(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	dir, _ := filepath.Abs("../testdata/sdk-node")
	for _, pkg := range []string{"openai", "@anthropic-ai/sdk", "@google/genai"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
		}
	}
	url, key := zeroConfig(t)
	snippets := readmeBlocks(t, "js")
	if len(snippets) != 3 {
		t.Fatalf("%d Node snippets in the README, want 3", len(snippets))
	}
	for i, snippet := range snippets {
		name := fmt.Sprint(i + 1)
		if m := regexp.MustCompile(`from '([^']+)'`).FindStringSubmatch(snippet); m != nil {
			name = m[1]
		}
		t.Run(name, func(t *testing.T) {
			// The snippet must sit beside node_modules for its imports.
			f, err := os.CreateTemp(dir, ".readme-snippet-*.mjs")
			if err != nil {
				t.Fatal(err)
			}
			defer os.Remove(f.Name())
			f.WriteString(strings.ReplaceAll(snippet, "http://127.0.0.1:8080", url))
			f.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, f.Name())
			cmd.Env = append(os.Environ(), "TTFX_CLIENT_KEY="+key)
			out, err := cmd.CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) < 10 {
				t.Fatalf("README Node snippet %d: %v\n%s\n%s", i+1, err, out, snippet)
			}
			t.Logf("streamed: %.80q", out)
		})
	}
}

// TestReadmePythonSnippets: the Python SDKs are not installed here, so the
// README's Python snippets are only parsed (python3's ast), which catches
// what a copy-paste would trip on first.
func TestReadmePythonSnippets(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		testenv.Missing(t, "python3", "Debian package python3")
	}
	snippets := readmeBlocks(t, "python")
	if len(snippets) != 3 {
		t.Fatalf("%d Python snippets in the README, want 3", len(snippets))
	}
	for i, s := range snippets {
		cmd := exec.Command(py, "-c", "import ast, sys; ast.parse(sys.stdin.read())")
		cmd.Stdin = strings.NewReader(s)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("README Python snippet %d does not parse: %v\n%s\n%s", i+1, err, out, s)
		}
		if !strings.Contains(s, `"http://127.0.0.1:8080`) || !strings.Contains(s, `os.environ["TTFX_CLIENT_KEY"]`) {
			t.Errorf("README Python snippet %d does not point at the gateway with the client key:\n%s", i+1, s)
		}
	}
}
