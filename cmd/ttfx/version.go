package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/ttfx/ttfx/internal/bench"
)

func init() {
	register(command{name: "version", summary: "print the version of ttfx and the Go toolchain it was built with", run: runVersion})
}

func runVersion(_ context.Context, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if _, err := parseFlags(fs, args, "usage: ttfx version\n", os.Stdout); err != nil {
		return err
	}
	writeVersion(os.Stdout)
	return nil
}

// writeVersion prints the version — the one a release build sets (the
// same bench.Version every benchmark result records), else the module's (a
// tag or pseudo-version for `go install …@v…`, "(devel)" for a build from
// a work tree) — the commit and its time when the build recorded them, and
// the Go toolchain.
func writeVersion(w io.Writer) {
	version, commit, when, modified := bench.Version, "", "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "dev" && bi.Main.Version != "" {
			version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				when = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
	}
	fmt.Fprintf(w, "ttfx %s\n", version)
	if commit != "" {
		if len(commit) > 12 {
			commit = commit[:12]
		}
		dirty := ""
		if modified {
			dirty = " (with uncommitted changes)"
		}
		fmt.Fprintf(w, "commit %s %s%s\n", commit, when, dirty)
	}
	fmt.Fprintf(w, "built with %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
