package testenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// skips counts the tests of this test binary that Missing skipped, by what
// was missing.
var skips struct {
	mu     sync.Mutex
	byWhat map[string]map[string]bool // what → names of the tests
}

func countSkip(what, test string) {
	skips.mu.Lock()
	defer skips.mu.Unlock()
	if skips.byWhat == nil {
		skips.byWhat = map[string]map[string]bool{}
	}
	if skips.byWhat[what] == nil {
		skips.byWhat[what] = map[string]bool{}
	}
	skips.byWhat[what][test] = true
}

// Main runs a package's tests; call it from the package's TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
// After the tests it prints one line when some skipped because a server
// was missing ("internal/store: 14 tests skipped, missing PostgreSQL
// (TTFX_TEST_POSTGRES) ×14"), so that `go test ./...` says how much did
// not run. go test shows nothing of a passing package's output without -v,
// so the line goes to the terminal (/dev/tty) when there is one, and to
// standard error otherwise (seen with -v, or when the package fails).
//
// It also starts WatchTimers, so that checks of durations can read Slip.
func Main(m *testing.M) {
	WatchTimers()
	code := m.Run()
	if line := Summary(packageName()); line != "" {
		report(line)
	}
	os.Exit(code)
}

// Summary is the line Main prints for pkg, or "" when no test skipped for
// a missing server.
func Summary(pkg string) string {
	skips.mu.Lock()
	defer skips.mu.Unlock()
	total := 0
	var parts []string
	for what, tests := range skips.byWhat {
		total += len(tests)
		parts = append(parts, fmt.Sprintf("%s ×%d", what, len(tests)))
	}
	if total == 0 {
		return ""
	}
	slices.Sort(parts)
	s := "s"
	if total == 1 {
		s = ""
	}
	return fmt.Sprintf("%s: %d test%s skipped, missing %s (docs/testing.md: how to provide them; TTFX_REQUIRE_ALL=1 makes them failures)",
		pkg, total, s, strings.Join(parts, ", "))
}

// report writes line where a user running go test sees it.
func report(line string) {
	var w io.Writer = os.Stderr
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		w = tty
	}
	fmt.Fprintln(w, line)
}

// packageName is the package under test relative to its module's root
// ("internal/store"): go test runs a test binary in its package's
// directory.
func packageName() string {
	wd, err := os.Getwd()
	if err != nil {
		return "?"
	}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if rel, err := filepath.Rel(dir, wd); err == nil {
				return filepath.ToSlash(rel)
			}
			return wd
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return wd
		}
		dir = parent
	}
}
