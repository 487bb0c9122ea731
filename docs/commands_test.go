// Package docs holds no code: its test keeps the shell commands of the
// README and of docs/*.md honest (the pages in covered; see there). Every line of a ```sh block is listed
// below with how it is covered — run here as written, run by .ci/run as
// written, run by a named test, or checked (a benchmark, fuzz target or
// script that takes minutes: it must exist as the command names it) — and a
// command the list does not know, or one the list names but no page shows,
// fails the test.
package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// how a documented command is covered.
type how struct {
	run    bool   // run here, in the repository's root, with bash
	needs  string // the binary a run needs (testenv.Missing without it)
	ci     string // the line of .ci/run that runs it (modulo as_root)
	test   string // a test that runs it: "dir.TestName" (or Benchmark, Fuzz)
	script string // a script that must exist, parse (bash -n) and read these variables
	vars   []string
	note   string // why it is covered this way
}

var commands = map[string]how{
	// README.md
	`go run ./cmd/ttfx demo`: {test: "internal/demo.TestDemo", note: "the demo's traces and verdicts"},
	`go test ./...`:          {ci: `go test -timeout 25m ./...`},
	`go install github.com/ttfx/ttfx/cmd/ttfx@latest`: {test: "cmd/ttfx.TestGoInstallFromCheckout",
		note: "installs ./cmd/ttfx from this checkout the same way and checks the README names go.mod's module"},
	`ttfx serve`:                {test: "cmd/ttfx.TestDocsSession"},
	`ttfx requests --since 10m`: {test: "cmd/ttfx.TestDocsSession"},
	`ttfx diagnose req_…`:       {test: "cmd/ttfx.TestDocsSession", note: "with the id of the request the session made"},

	// docs/configuration.md
	`ttfx serve --config ttfx.yaml`: {test: "cmd/ttfx.TestServeTwoProcessesOnePostgres",
		note: "serve --config; the file's own examples are parsed by internal/config.TestConfigurationReferenceExamplesParse"},

	// docs/operations.md
	`go build -o ttfx ./cmd/ttfx && ./ttfx serve`: {test: "cmd/ttfx.TestDocsSession"},
	`curl -i -N localhost:8080/v1/chat/completions -H "Authorization: Bearer $TTFX_CLIENT_KEY" -d '{"model":"trace-b","stream":true,"messages":[{"role":"user","content":"hi"}]}'`: {
		test: "cmd/ttfx.TestDocsSession", note: "run with curl as written, on the test gateway's address"},
	`./ttfx requests --since 10m`:                                                   {test: "cmd/ttfx.TestDocsSession"},
	`./ttfx diagnose req_…`:                                                         {test: "cmd/ttfx.TestDocsSession"},
	`./ttfx keys new --name team-b --role client --group b`:                         {test: "cmd/ttfx.TestDocsSession"},
	`promtool check rules deploy/prometheus/rules.yml deploy/prometheus/alerts.yml`: {run: true, needs: "promtool"},
	`cd deploy/prometheus && promtool test rules alerts.test.yml`:                   {run: true, needs: "promtool"},
	`scripts/image.sh ttfx:dev`:                                                     {test: "deploy.TestContainerImage", note: "builds the image with another tag and removes it"},

	// docs/operations-reload.md
	`ttfx channels list`:              {test: "cmd/ttfx.TestChannelsDrainEjectUneject", note: "list, drain, disable, enable and uneject against a running gateway"},
	`ttfx channels drain eu-primary`:  {test: "cmd/ttfx.TestChannelsDrainEjectUneject", note: "on the test's channel a"},
	`ttfx channels enable eu-primary`: {test: "cmd/ttfx.TestChannelsDrainEjectUneject", note: "on the test's channel a"},

	// docs/testing.md
	`eval "$(bash scripts/ci-postgres.sh)"`:                                         {ci: `eval "$(bash scripts/ci-postgres.sh)"`},
	`eval "$(bash scripts/ci-clickhouse.sh)"`:                                       {ci: `eval "$(bash scripts/ci-clickhouse.sh)"`},
	`bash scripts/ci-prometheus.sh`:                                                 {ci: `bash scripts/ci-prometheus.sh`},
	`bash scripts/ci-chromium.sh`:                                                   {ci: `bash scripts/ci-chromium.sh`},
	`bash scripts/ci-podman.sh`:                                                     {ci: `bash scripts/ci-podman.sh`},
	`npm ci --prefix testdata/sdk-node`:                                             {ci: `npm ci --prefix testdata/sdk-node --no-audit --no-fund`},
	`TTFX_REQUIRE_ALL=1 go test ./...`:                                              {ci: `go test -timeout 25m ./...`, note: ".ci/run exports TTFX_REQUIRE_ALL=1 first"},
	`go test -short ./...`:                                                          {note: "go test ./... (CI) with -short: the same tests less those that call testing.Short"},
	`go test -run '^$' -bench . ./internal/...`:                                     {note: "every benchmark: minutes; each compiles and runs its first iteration nowhere else, so it is listed, not run"},
	`go test -run '^$' -bench Soak -benchtime 1x ./internal/server/`:                {test: "internal/server.BenchmarkSoak", note: "two minutes of 1,000 streams"},
	`go test ./internal/provider/openai -run '^$' -fuzz '^FuzzChat$' -fuzztime 60s`: {test: "internal/provider/openai.FuzzChat", note: "a minute of fuzzing; its seeds run in every go test"},
	`grep -rn '^func Fuzz' internal`:                                                {run: true},

	// docs/performance.md: minutes each, and nginx; the harness is checked.
	`scripts/perf/run.sh . 3 200`:                            {script: "scripts/perf/run.sh"},
	`C1_STREAMS=100 C1_EVENTS=4 scripts/perf/run.sh . 5 200`: {script: "scripts/perf/run.sh", vars: []string{"C1_STREAMS", "C1_EVENTS"}},
	`UPSTREAM_TLS=1 scripts/perf/run.sh . 3 200`:             {script: "scripts/perf/run.sh", vars: []string{"UPSTREAM_TLS"}},
	`HOLD=2000 scripts/perf/run.sh . 0`:                      {script: "scripts/perf/run.sh", vars: []string{"HOLD"}},
}

// covered are the pages whose every command must be in the list. Pages
// written by other work (docs/scale.md, the pages added beside these) are
// read too: their commands that the list knows count, and the others are
// logged until the list takes them in.
var covered = map[string]bool{
	"README.md": true, "docs/configuration.md": true, "docs/operations.md": true,
	"docs/testing.md": true, "docs/performance.md": true, "docs/design.md": true,
	"docs/operations-reload.md": true,
}

// shellCommands returns the commands of the ```sh blocks of a Markdown
// page: continuation lines joined, comments and blank lines dropped.
func shellCommands(page string) []string {
	var out []string
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(page, -1) {
		var cur string
		for _, line := range strings.Split(m[1], "\n") {
			if c, ok := strings.CutSuffix(strings.TrimRight(line, " "), "\\"); ok {
				cur += strings.TrimSpace(c) + " "
				continue
			}
			line = cur + strings.TrimSpace(line)
			cur = ""
			// A comment starts at " #" after the command (none of the
			// commands has a # of its own).
			if i := strings.Index(line, " #"); i >= 0 {
				line = line[:i]
			}
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				out = append(out, line)
			}
		}
	}
	return out
}

func TestDocumentedCommands(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append([]string{filepath.Join(root, "README.md")}, pages...)
	seen := map[string]bool{}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, p)
		for _, c := range shellCommands(string(b)) {
			if _, ok := commands[c]; ok {
				seen[c] = true
				continue
			}
			if covered[rel] {
				t.Errorf("%s shows a command docs/commands_test.go does not cover:\n\t%s\nadd it to the commands list with a test that runs it (or run it there)", rel, c)
			} else {
				t.Logf("not covered yet: %s shows %s", rel, c)
			}
		}
	}
	ciRun, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	ci := strings.ReplaceAll(string(ciRun), "as_root ", "")
	var names []string
	for c := range commands {
		names = append(names, c)
	}
	slices.Sort(names)
	for _, c := range names {
		h := commands[c]
		if !seen[c] {
			t.Errorf("the commands list names %q, which no page shows any more: remove it", c)
			continue
		}
		switch {
		case h.run:
			t.Run(c, func(t *testing.T) {
				if h.needs != "" {
					if _, err := exec.LookPath(h.needs); err != nil {
						testenv.Missing(t, h.needs, "docs/testing.md says how to install it")
					}
				}
				cmd := exec.Command("bash", "-c", c)
				cmd.Dir = root
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("%s: %v\n%s", c, err, out)
				}
			})
		case h.ci != "":
			if !slices.Contains(strings.Split(ci, "\n"), h.ci) {
				t.Errorf("%q: .ci/run has no line %q", c, h.ci)
			}
		case h.test != "":
			dir, name, _ := strings.Cut(h.test, ".")
			if !definedIn(t, filepath.Join(root, dir), name) {
				t.Errorf("%q: no func %s in %s", c, name, dir)
			}
		case h.script != "":
			path := filepath.Join(root, h.script)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("%q: %v", c, err)
				continue
			}
			if fi, _ := os.Stat(path); fi.Mode()&0o111 == 0 {
				t.Errorf("%s is not executable", h.script)
			}
			if out, err := exec.Command("bash", "-n", path).CombinedOutput(); err != nil {
				t.Errorf("bash -n %s: %v\n%s", h.script, err, out)
			}
			for _, v := range h.vars {
				if !strings.Contains(string(b), v) {
					t.Errorf("%q: %s does not read %s", c, h.script, v)
				}
			}
		case h.note == "":
			t.Errorf("%q: the list says neither how it runs nor why it is not run", c)
		}
	}
}

// definedIn reports whether a _test.go file of dir defines func name.
func definedIn(t *testing.T, dir, name string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	re := regexp.MustCompile(`(?m)^func ` + regexp.QuoteMeta(name) + `\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if re.Match(b) {
			return true
		}
	}
	return false
}
