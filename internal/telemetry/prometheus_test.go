package telemetry_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/telemetry"
	"github.com/ttfx/ttfx/internal/testenv"
)

// prometheusBinary finds Debian's prometheus, or skips — fails under
// TTFX_REQUIRE_ALL=1, as CI runs (scripts/ci-prometheus.sh installs it).
func prometheusBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p
	}
	testenv.Missing(t, "the prometheus binary", "Debian package prometheus; `bash scripts/ci-prometheus.sh` installs it")
	return ""
}

// startPrometheus runs a real Prometheus server scraping target every
// second, with its own configuration and storage in a temp dir, and
// returns its base URL. It is stopped when the test ends.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ttfx
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: [%q]
`, target)
	return startPrometheusConfig(t, bin, cfg)
}

// startPrometheusConfig runs a real Prometheus server with the
// configuration cfg and extra flags (feature flags), its storage in a temp
// dir, and returns its base URL. It is stopped when the test ends.
func startPrometheusConfig(t *testing.T, bin, cfg string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	// A free loopback port for its web API.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out bytes.Buffer
	cmd := exec.Command(bin, append([]string{
		"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr,
		"--log.level=warn",
	}, flags...)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.String())
		}
	})
	base := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		select {
		case <-exited:
			t.Fatalf("prometheus exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30 s: %s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// promQuery runs an instant query through the HTTP API and returns the
// value of its single sample, or ok false when the result is empty.
func promQuery(t *testing.T, base, q string) (float64, bool) {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	if body.Status != "success" {
		t.Fatalf("query %s: %s", q, body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, false
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("query %s: value %q", q, s)
	}
	return v, true
}

// waitQuery polls q until cond holds for its value, up to 30 s.
func waitQuery(t *testing.T, base, q string, cond func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, ok := promQuery(t, base, q)
		if ok && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("query %s: %v (present %v) after 30 s", q, v, ok)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestPrometheusScrapesGateway is issue 8's integration test: a real
// Prometheus scrapes the gateway, and the PromQL median of time to first
// visible text matches the simulator profile (text at 250 ms).
func TestPrometheusScrapesGateway(t *testing.T) {
	bin := prometheusBinary(t)
	g := startGateway(t)
	prom := startPrometheus(t, bin, strings.TrimPrefix(g.url, "http://"))
	waitQuery(t, prom, `up{job="ttfx"}`, func(v float64) bool { return v == 1 })

	var ids []string
	batch := func(n int) {
		var wg sync.WaitGroup
		got := make([]string, n)
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = g.do("openai.chat", "ttft-250", g.client)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, got...)
	}
	// rate() needs the series in two scrapes: a first batch makes it
	// exist, the second is the increase the quantile is computed over.
	batch(6)
	count := `sum(ttfx_time_to_first_text_seconds_count{model="ttft-250"})`
	waitQuery(t, prom, count, func(v float64) bool { return v == 6 })
	batch(6)
	waitQuery(t, prom, count, func(v float64) bool { return v == 12 })
	q := waitQuery(t, prom, `histogram_quantile(0.5, sum by (le) (rate(ttfx_time_to_first_text_seconds_bucket[1m])))`,
		func(v float64) bool { return v == v }) // not NaN

	recs := waitRecords(t, g.srv, ids)
	var ttft []float64
	for _, r := range recs {
		d, ok := r.FirstTextDeltaMs.Get()
		if !ok {
			t.Fatalf("record %s has no first text", r.RequestID)
		}
		ttft = append(ttft, d.Seconds())
	}
	sort.Float64s(ttft)
	// The profile sends its first text 250 ms after the request: never
	// earlier, and later only by what this process's timers were seen to
	// slip meanwhile (twice: the simulator's wait and the gateway's read).
	slip := testenv.Slip(time.Minute).Seconds()
	if med := ttft[len(ttft)/2]; med < 0.25 || med > 0.3+2*slip {
		t.Errorf("records' median first_text_delta %v s, want 0.25–%.3f (timers slipped up to %.3f s)", med, 0.3+2*slip, slip)
	}
	// PromQL's median lies in the buckets of the middle observations the
	// records hold: the histogram says what the records say.
	lo, hi := bucketOf(ttft[len(ttft)/2-1]), bucketOf(ttft[len(ttft)/2])
	if q <= lo[0] || q > hi[1] {
		t.Errorf("PromQL median time to first text = %v s, want in (%v, %v], the buckets of the records' middle values %.4f and %.4f",
			q, lo[0], hi[1], ttft[len(ttft)/2-1], ttft[len(ttft)/2])
	}
	t.Logf("PromQL p50 time to first text %.4f s; records' median %.4f s (min %.4f, max %.4f)", q, ttft[len(ttft)/2], ttft[0], ttft[len(ttft)-1])
}

// bucketOf is the (lower, upper] bounds of the LatencyBuckets bucket that
// holds v seconds.
func bucketOf(v float64) [2]float64 {
	lower := 0.0
	for _, b := range telemetry.LatencyBuckets {
		if v <= b {
			return [2]float64{lower, b}
		}
		lower = b
	}
	return [2]float64{lower, math.Inf(1)}
}
