package main

import (
	"errors"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// TestHelpEverywhere: --help (and -h) on every command and subcommand
// prints its usage once, on stdout, and exits 0 (issue 14).
func TestHelpEverywhere(t *testing.T) {
	var cmds [][]string
	for name := range commands {
		cmds = append(cmds, []string{name})
	}
	for _, sub := range []string{"report", "compare", "merge"} {
		cmds = append(cmds, []string{"bench", sub})
	}
	for _, sub := range keysSub {
		cmds = append(cmds, []string{"keys", sub})
	}
	cmds = append(cmds, []string{"diagnose", "req_123"}, []string{"inspect", "x.sse"}) // --help after an argument
	for _, c := range cmds {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string{}, c...), h)
			stdout, stderr, err := ttfxRun(t, t.TempDir(), args...)
			if err != nil {
				t.Errorf("ttfx %s: %v\n%s", strings.Join(args, " "), err, stderr)
				continue
			}
			if n := strings.Count(strings.ToLower(stdout), "usage:"); n != 1 || stderr != "" {
				t.Errorf("ttfx %s: usage printed %d times on stdout; stderr %q:\n%s", strings.Join(args, " "), n, stderr, stdout)
			}
			if !strings.Contains(stdout, "ttfx "+c[0]) {
				t.Errorf("ttfx %s: usage does not name the command:\n%s", strings.Join(args, " "), stdout)
			}
			// No file the gateway no longer makes (keys live in the
			// store since issue 32).
			if strings.Contains(stdout, "ttfx.keys.json") {
				t.Errorf("ttfx %s: usage names ttfx.keys.json:\n%s", strings.Join(args, " "), stdout)
			}
		}
	}
	// A wrong flag is still a usage error: exit 2, the usage on stderr.
	_, stderr, err := ttfxRun(t, t.TempDir(), "serve", "--nope")
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr, "usage: ttfx serve") {
		t.Errorf("serve --nope: %v\n%s", err, stderr)
	}
}

// TestVersionAndCommandList: `ttfx version` and `ttfx --version` print the
// version and the Go toolchain; `ttfx` alone lists every command.
func TestVersionAndCommandList(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}} {
		stdout, _, err := ttfxRun(t, t.TempDir(), args...)
		if err != nil || !strings.HasPrefix(stdout, "ttfx ") || !strings.Contains(stdout, runtime.Version()) {
			t.Errorf("ttfx %s: %v\n%s", args[0], err, stdout)
		}
	}
	_, stderr, _ := ttfxRun(t, t.TempDir())
	for name := range commands {
		if !strings.Contains(stderr, "  "+name+" ") {
			t.Errorf("ttfx alone does not list %s:\n%s", name, stderr)
		}
	}
}
