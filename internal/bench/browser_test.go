package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ttfx/ttfx/internal/testenv"
)

// TestHTMLLegendInBrowser opens the HTML report of a run in headless
// Chromium and checks that every legend entry of the CDF ends inside its
// chart (it was clipped at the chart's edge), with the longest entries a
// run can have: six-digit counts, and a mark that no request reached. A
// screenshot is left in TTFX_SCREENSHOTS (or the test's directory).
func TestHTMLLegendInBrowser(t *testing.T) {
	exe := os.Getenv("TTFX_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser"} {
		if exe != "" {
			break
		}
		if p, err := exec.LookPath(name); err == nil {
			exe = p
		}
	}
	if exe == "" {
		testenv.Missing(t, "chromium", "`bash scripts/ci-chromium.sh` installs it (or set TTFX_CHROMIUM)")
	}
	res := mixedResult(t)
	var buf bytes.Buffer
	if err := WriteHTML(&buf, res); err != nil {
		t.Fatal(err)
	}
	// The longest counts a run shows: (123456/123456).
	html := bytes.ReplaceAll(buf.Bytes(), []byte("(3/6)"), []byte("(123456/123456)"))
	dir := os.Getenv("TTFX_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(page, html, 0o644); err != nil {
		t.Fatal(err)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancelTab := chromedp.NewContext(actx)
	defer cancelTab()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible(chromedp.CSS(`svg[aria-label^="CDF"]`))); err != nil {
		t.Fatalf("open the report: %v", err)
	}
	// Each legend entry's right edge against its chart's width, in the
	// chart's own units.
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]any](`(() => {
		const svg = document.querySelector('svg[aria-label^="CDF"]');
		const w = svg.viewBox.baseVal.width;
		return [...svg.querySelectorAll('text[data-legend]')].map(t => {
			const b = t.getBBox();
			return [t.textContent, b.x + b.width, w];
		});
	})()`))
	if err != nil {
		t.Fatalf("measure the legend: %v", err)
	}
	if len(got) != 4 {
		t.Fatalf("%d legend entries, want 4: %v", len(got), got)
	}
	for _, e := range got {
		v := e.([]any)
		if right, w := v[1].(float64), v[2].(float64); right > w {
			t.Errorf("legend %q ends at %.0f, past the chart's width %.0f", v[0], right, w)
		}
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-report.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}
