package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"time"

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
// a work tree) — the commit and its time when the build recorded them (or
// a pseudo-version names them), else how to get them, and the Go toolchain.
func writeVersion(w io.Writer) {
	bi, _ := debug.ReadBuildInfo()
	for _, l := range versionLines(bi, bench.Version) {
		fmt.Fprintln(w, l)
	}
}

// noCommit is what a build without version control information says
// instead of its commit. A plain `go build` records the commit and its time
// only in a git clone (the go command does not recognise a worktree's
// .git file) and with -buildvcs not false (`go env GOFLAGS` may hold
// -buildvcs=false, as CI machines often set).
const noCommit = "commit unknown: this build has no version control information " +
	"(-buildvcs=false in `go env GOFLAGS`, or not built in a git clone: a git worktree does not count); " +
	"`go build -buildvcs=true ./cmd/ttfx` in a git clone records the commit and its time"

// pseudoVersion matches a module pseudo-version's time and commit
// (v0.0.0-20261207040116-591189c1a2b3, v1.2.4-0.20261207040116-591189c1a2b3).
var pseudoVersion = regexp.MustCompile(`[-.](\d{14})-([0-9a-f]{12})(\+incompatible)?$`)

// versionLines is what `ttfx version` prints for a build's information
// (bi may be nil) and the version a release build set ("dev" if none).
func versionLines(bi *debug.BuildInfo, release string) []string {
	version, commit, when, modified := release, "", "", false
	if bi != nil {
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
	lines := []string{"ttfx " + version}
	switch m := pseudoVersion.FindStringSubmatch(version); {
	case commit != "":
		if len(commit) > 12 {
			commit = commit[:12]
		}
		dirty := ""
		if modified {
			dirty = " (with uncommitted changes)"
		}
		lines = append(lines, fmt.Sprintf("commit %s %s%s", commit, when, dirty))
	case m != nil:
		// `go install …@latest` of an untagged commit: the module's
		// pseudo-version names the commit and its time (UTC).
		if t, err := time.Parse("20060102150405", m[1]); err == nil {
			lines = append(lines, fmt.Sprintf("commit %s %s", m[2], t.UTC().Format(time.RFC3339)))
		}
	case version == "dev" || version == "(devel)" || version == "":
		lines = append(lines, noCommit)
	}
	return append(lines, fmt.Sprintf("built with %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH))
}
