package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestGoInstallFromCheckout installs ttfx the way the README's install line
// does, from this checkout (`go install ./cmd/ttfx` into a GOBIN of its
// own), and runs what it installed: `ttfx version` must state what the Go
// toolchain recorded in the binary (`go version -m`): the commit and its
// time when it has them, else how to get them.
func TestGoInstallFromCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("links a binary (-short)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The README's line names the module path go.mod declares.
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod declares no module")
	}
	if line := "go install " + string(m[1]) + "/cmd/ttfx@latest"; !strings.Contains(string(readme), line) {
		t.Errorf("README.md does not name %q", line)
	}

	gobin := t.TempDir()
	install := exec.Command("go", "install", "./cmd/ttfx")
	install.Dir = root
	install.Env = append(os.Environ(), "GOBIN="+gobin)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/ttfx: %v\n%s", err, out)
	}
	bin := filepath.Join(gobin, "ttfx")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("installed ttfx version: %v\n%s", err, out)
	}
	t.Logf("installed ttfx version:\n%s", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || lines[0] != "ttfx (devel)" || lines[2] != "built with "+runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH {
		t.Fatalf("installed ttfx version: want the version, the commit line and the toolchain, got:\n%s", out)
	}

	// What the toolchain recorded, read independently of ttfx.
	meta, err := exec.Command("go", "version", "-m", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go version -m: %v\n%s", err, meta)
	}
	setting := func(key string) string {
		m := regexp.MustCompile(`(?m)^\s+build\s+` + regexp.QuoteMeta(key) + `=(\S+)$`).FindSubmatch(meta)
		if m == nil {
			return ""
		}
		return string(m[1])
	}
	rev := setting("vcs.revision")
	if rev == "" {
		if lines[1] != noCommit {
			t.Errorf("a build without VCS information: want %q, got %q", noCommit, lines[1])
		}
		return
	}
	want := "commit " + rev[:12] + " " + setting("vcs.time")
	if setting("vcs.modified") == "true" {
		want += " (with uncommitted changes)"
	}
	if lines[1] != want {
		t.Errorf("commit line %q, want %q", lines[1], want)
	}
	// And it is this checkout's commit, at its time.
	head, err := exec.Command("git", "-C", root, "show", "-s", "--format=%H %ct", "HEAD").Output()
	if err != nil {
		t.Fatalf("git show HEAD: %v", err)
	}
	f := strings.Fields(string(head))
	sec, _ := strconv.ParseInt(f[1], 10, 64)
	if rev != f[0] || setting("vcs.time") != time.Unix(sec, 0).UTC().Format(time.RFC3339) {
		t.Errorf("recorded %s %s, HEAD is %s at %s", rev, setting("vcs.time"), f[0], time.Unix(sec, 0).UTC().Format(time.RFC3339))
	}
}

// TestVersionLines: what `ttfx version` prints for each kind of build.
func TestVersionLines(t *testing.T) {
	toolchain := "built with " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "591189cecc1e8628ec7c0f0182866fe9a26f2f2f"},
		{Key: "vcs.time", Value: "2026-12-07T04:01:15Z"},
	}
	for _, c := range []struct {
		name, release string
		bi            *debug.BuildInfo
		want          []string
	}{
		{"work tree with VCS", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			[]string{"ttfx (devel)", "commit 591189cecc1e 2026-12-07T04:01:15Z", toolchain}},
		{"uncommitted changes", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: append(vcs[:3:3], debug.BuildSetting{Key: "vcs.modified", Value: "true"})},
			[]string{"ttfx (devel)", "commit 591189cecc1e 2026-12-07T04:01:15Z (with uncommitted changes)", toolchain}},
		{"-buildvcs=false", "dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}},
			[]string{"ttfx (devel)", noCommit, toolchain}},
		{"no build information", "dev", nil,
			[]string{"ttfx dev", noCommit, toolchain}},
		{"go install @latest of an untagged commit", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261207040115-591189cecc1e"}},
			[]string{"ttfx v0.0.0-20261207040115-591189cecc1e", "commit 591189cecc1e 2026-12-07T04:01:15Z", toolchain}},
		{"go install of a pseudo-version after a tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.4-0.20261207040115-591189cecc1e"}},
			[]string{"ttfx v1.2.4-0.20261207040115-591189cecc1e", "commit 591189cecc1e 2026-12-07T04:01:15Z", toolchain}},
		{"go install of a tag", "dev", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			[]string{"ttfx v1.2.3", toolchain}},
		{"release build", "v1.2.3", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			[]string{"ttfx v1.2.3", "commit 591189cecc1e 2026-12-07T04:01:15Z", toolchain}},
	} {
		got := versionLines(c.bi, c.release)
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
