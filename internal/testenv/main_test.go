package testenv

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSummary: the line counts each skipped test once, by what was missing.
func TestSummary(t *testing.T) {
	if s := Summary("internal/x"); s != "" {
		t.Fatalf("summary with no skips: %q", s)
	}
	countSkip("PostgreSQL (TTFX_TEST_POSTGRES)", "TestA")
	countSkip("PostgreSQL (TTFX_TEST_POSTGRES)", "TestB/postgres")
	countSkip("PostgreSQL (TTFX_TEST_POSTGRES)", "TestB/postgres") // the same test twice
	countSkip("chromium", "TestC")
	want := "internal/x: 3 tests skipped, missing PostgreSQL (TTFX_TEST_POSTGRES) ×2, chromium ×1"
	if s := Summary("internal/x"); !strings.HasPrefix(s, want) || !strings.Contains(s, "TTFX_REQUIRE_ALL=1") {
		t.Fatalf("summary\n got %q\nwant %q…", s, want)
	}
	if p := packageName(); p != "internal/testenv" {
		t.Fatalf("package name %q", p)
	}
}

// TestEveryPackageReportsSkips: each package whose tests can skip for a
// missing server has the TestMain that counts them, so that `go test ./...`
// names every skip without -v.
func TestEveryPackageReportsSkips(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	skips := regexp.MustCompile(`testenv\.(Missing|PostgresDSN|PostgresSchema)\(`)
	needs, has := map[string]bool{}, map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		if filepath.Base(dir) == "testenv" {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if skips.Match(b) {
			needs[dir] = true
		}
		if strings.Contains(string(b), "testenv.Main(m)") {
			has[dir] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(needs) == 0 {
		t.Fatal("found no package that skips for a missing server")
	}
	for dir := range needs {
		if !has[dir] {
			rel, _ := filepath.Rel(root, dir)
			t.Errorf("%s skips for missing servers but has no `func TestMain(m *testing.M) { testenv.Main(m) }`", rel)
		}
	}
}
