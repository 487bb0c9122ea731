package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDocsSession runs the session of docs/operations.md (and the README's
// tour) with the commands as written: `./ttfx serve` with no configuration
// (on a free port instead of 8080), its export lines pasted, the curl
// command, `./ttfx requests --since 10m`, `./ttfx diagnose` with the id curl
// showed, and `./ttfx keys new --name team-b --role client --group b`, whose
// key must work within 2 s without a restart.
func TestDocsSession(t *testing.T) {
	if testing.Short() {
		t.Skip("trace B takes 10 s (-short)")
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("curl is missing (Debian package curl)")
	}
	dir := t.TempDir()
	p := serve(t, dir, nil)
	defer p.stop(t)

	// Paste the export lines.
	env := os.Environ()
	exports := regexp.MustCompile(`(?m)^export (TTFX_[A-Z]+_KEY)=(ttfx-\S+)$`).FindAllStringSubmatch(p.out.String(), -1)
	if len(exports) != 3 {
		t.Fatalf("want three export lines:\n%s", p.out.String())
	}
	for _, m := range exports {
		env = append(env, m[1]+"="+m[2])
	}
	env = append(env, "TTFX_URL="+p.url)
	sh := func(command string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", command)
		cmd.Dir = dir
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", command, err, out)
		}
		return string(out)
	}
	// ./ttfx is the binary `go build -o ttfx ./cmd/ttfx` made.
	if err := os.Symlink(ttfxBinary(t), dir+"/ttfx"); err != nil {
		t.Fatal(err)
	}

	out := sh(curl + ` -sS -i -N ` + strings.TrimPrefix(p.url, "http://") + `/v1/chat/completions -H "Authorization: Bearer $TTFX_CLIENT_KEY" ` +
		`-d '{"model":"trace-b","stream":true,"messages":[{"role":"user","content":"hi"}]}'`)
	m := regexp.MustCompile(`(?mi)^x-request-id: (\S+)\r?$`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, "data: [DONE]") {
		t.Fatalf("curl:\n%s", out)
	}
	id := m[1]

	// The record is written off the hot path: a few hundred ms at most.
	deadline := time.Now().Add(10 * time.Second)
	for out = sh("./ttfx requests --since 10m"); !strings.Contains(out, id) && time.Now().Before(deadline); out = sh("./ttfx requests --since 10m") {
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(out, id) || !strings.Contains(out, "trace-b") || !strings.Contains(out, "response_to_text_gap") {
		t.Fatalf("./ttfx requests --since 10m does not show %s with its verdict:\n%s", id, out)
	}
	out = sh("./ttfx diagnose " + id)
	if !strings.Contains(out, "response_to_text_gap") || !strings.Contains(out, id) {
		t.Fatalf("./ttfx diagnose %s:\n%s", id, out)
	}

	out = sh("./ttfx keys new --name team-b --role client --group b")
	key := regexp.MustCompile(`(?m)^export \S+=(ttfx-\S+)$`).FindStringSubmatch(out)
	if key == nil {
		t.Fatalf("keys new printed no export line:\n%s", out)
	}
	start := time.Now()
	for {
		resp, _ := post(t, p.url, key[1], `{"model":"fast","messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode == 200 {
			t.Logf("team-b's key worked %s after it was made", time.Since(start).Round(time.Millisecond))
			break
		}
		// The docs promise 2 s; the machine may be busy, so the test
		// allows 3 × that before it calls the promise broken.
		if time.Since(start) > 6*time.Second {
			t.Fatalf("the new key is refused %s after it was made: %d", time.Since(start).Round(time.Millisecond), resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
