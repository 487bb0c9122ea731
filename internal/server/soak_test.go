package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/sim"
)

// BenchmarkSoak holds 1,000 concurrent streams through a real `ttfx serve`
// process (SQLite store, a simulator upstream) for TTFX_SOAK_DURATION
// (default 2m), each client starting a new stream as soon as its last one
// ends, and samples the gateway process's RSS, goroutines (from its
// /metrics) and open descriptors every five seconds. After the load it
// checks that every stream was recorded and that goroutines and
// descriptors went back to where they started. Run it alone:
//
//	go test -run '^$' -bench Soak -benchtime 1x ./internal/server/
func BenchmarkSoak(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("samples /proc")
	}
	duration := 2 * time.Minute
	if s := os.Getenv("TTFX_SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("TTFX_SOAK_DURATION: %v", err)
		}
		duration = d
	}
	streams := 1000
	if s := os.Getenv("TTFX_SOAK_STREAMS"); s != "" {
		streams, _ = strconv.Atoi(s)
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "ttfx")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/ttfx/ttfx/cmd/ttfx").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	// Streams of 10 s: 50 events at 5 a second after a 200 ms start.
	up := httptest.NewServer(sim.New(sim.Options{Profiles: map[string]sim.Profile{
		"soak": {HeadersMs: 100, FirstEventMs: 150, TextMs: sim.Ms(200), VisibleTokens: 50, TPS: 5},
	}}))
	b.Cleanup(up.Close)
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
store: %q
keys:
  - {name: ops, role: admin, key_env: SOAK_ADMIN}
  - {name: load, role: client, group: load, key_env: SOAK_CLIENT}
channels:
  - {name: sim, protocol: openai, base_url: %q, key_env: SOAK_UPSTREAM,
     timeouts: {headers: 30s, first_output: 60s, idle: 30s, total: 5m}}
metrics: {key_env: SOAK_ADMIN}
log: {level: error}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), up.URL)
	cfgPath := filepath.Join(dir, "ttfx.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	const admin, client = "soak-admin-key-0123456789", "soak-client-key-0123456789"
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Env = append(os.Environ(), "SOAK_ADMIN="+admin, "SOAK_CLIENT="+client, "SOAK_UPSTREAM=u")
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	base := ""
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "ttfx gateway listening on "); ok {
			base = u
			break
		}
	}
	if base == "" {
		b.Fatal("the gateway did not say where it listens")
	}
	go io.Copy(io.Discard, stdout)
	pid := cmd.Process.Pid

	tr := &http.Transport{MaxIdleConnsPerHost: streams, MaxConnsPerHost: 0, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}
	hc := &http.Client{Transport: tr}
	b.Cleanup(tr.CloseIdleConnections)

	type sample struct {
		at                   time.Duration
		rssMB                float64
		goroutines, fds      int
		open, done, failures int64
	}
	var open, done, failures atomic.Int64
	take := func(start time.Time) sample {
		return sample{at: time.Since(start), rssMB: rssMB(pid), goroutines: gatewayGoroutines(hc, base, admin), fds: openFDs(pid),
			open: open.Load(), done: done.Load(), failures: failures.Load()}
	}
	idle := take(time.Now())
	loadAtStart := loadAvg()

	b.ResetTimer()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			// Spread the first starts over two seconds.
			time.Sleep(time.Duration(i) * 2 * time.Second / time.Duration(streams))
			for ctx.Err() == nil {
				open.Add(1)
				err := soakStream(hc, base, client)
				open.Add(-1)
				if err != nil {
					failures.Add(1)
					if failures.Load() <= 5 {
						b.Logf("stream: %v", err)
					}
					time.Sleep(100 * time.Millisecond)
					continue
				}
				done.Add(1)
			}
		})
	}
	var samples []sample
	tick := time.NewTicker(5 * time.Second)
	for loop := true; loop; {
		select {
		case <-tick.C:
			samples = append(samples, take(start))
		case <-ctx.Done():
			loop = false
		}
	}
	tick.Stop()
	wg.Wait()
	cancel()
	b.StopTimer()
	tr.CloseIdleConnections()

	// Every stream recorded, the queue drained.
	var h api.HealthResponse
	for deadline := time.Now().Add(30 * time.Second); ; {
		h = health(b, hc, base, admin)
		if h.Store.Writer != nil && h.Store.Writer.Queued == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // idle connections close on the gateway's side
	after := take(start)

	// On stdout: a benchmark's log is cut after a few lines without -v.
	var tb strings.Builder
	fmt.Fprintf(&tb, "load average at the start: %s\n", loadAtStart)
	fmt.Fprintf(&tb, "%8s %8s %10s %6s %8s %9s %8s\n", "t", "rss_MB", "goroutines", "fds", "streams", "completed", "failed")
	fmt.Fprintf(&tb, "%8s %8.1f %10d %6d %8d %9d %8d\n", "idle", idle.rssMB, idle.goroutines, idle.fds, 0, 0, 0)
	for _, s := range samples {
		fmt.Fprintf(&tb, "%8v %8.1f %10d %6d %8d %9d %8d\n", s.at.Round(time.Second), s.rssMB, s.goroutines, s.fds, s.open, s.done, s.failures)
	}
	fmt.Fprintf(&tb, "%8s %8.1f %10d %6d %8d %9d %8d\n", "after", after.rssMB, after.goroutines, after.fds, after.open, after.done, after.failures)
	w := h.Store.Writer
	fmt.Fprintf(&tb, "writer: written %d, queued %d, dropped %d, rejected %d", w.Written, w.Queued, w.Dropped, w.Rejected)
	fmt.Println(tb.String())

	// Flat after warm-up: the last sample against the first past a third
	// of the run.
	var warm, last sample
	for _, s := range samples {
		if warm.at == 0 && s.at >= duration/3 {
			warm = s
		}
		last = s
	}
	b.ReportMetric(float64(done.Load()), "streams")
	b.ReportMetric(float64(failures.Load()), "failed")
	b.ReportMetric(warm.rssMB, "rss_MB_warm")
	b.ReportMetric(last.rssMB, "rss_MB_end")
	b.ReportMetric(float64(last.goroutines), "goroutines_end")
	b.ReportMetric(float64(last.fds), "fds_end")
	if total := uint64(done.Load() + failures.Load()); w.Written+w.Dropped+w.Rejected < uint64(done.Load()) {
		b.Errorf("%d streams completed but %d records written (%d attempts)", done.Load(), w.Written, total)
	}
	// What may stay: the upstream connections the transport keeps idle
	// (relay.NewTransport: 256 per host, two goroutines and a descriptor
	// each).
	const pooled = 256
	if after.goroutines > idle.goroutines+2*pooled+20 || after.fds > idle.fds+pooled+20 {
		b.Errorf("after the load: %d goroutines and %d descriptors, against %d and %d before it (up to %d idle upstream connections may stay)",
			after.goroutines, after.fds, idle.goroutines, idle.fds, pooled)
	}
}

// soakStream relays one stream and reads it to its end.
func soakStream(hc *http.Client, base, key string) error {
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions",
		strings.NewReader(`{"model":"soak","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("[DONE]")) {
		return fmt.Errorf("%d, %d bytes without [DONE]", resp.StatusCode, len(b))
	}
	return nil
}

func health(b *testing.B, hc *http.Client, base, key string) api.HealthResponse {
	req, _ := http.NewRequest("GET", base+"/api/health", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	var h api.HealthResponse
	resp, err := hc.Do(req)
	if err != nil {
		b.Logf("health: %v", err)
		return h
	}
	defer resp.Body.Close()
	json.NewDecoder(resp.Body).Decode(&h)
	return h
}

// gatewayGoroutines reads go_goroutines from the gateway's /metrics.
func gatewayGoroutines(hc *http.Client, base, key string) int {
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	return -1
}

// rssMB is a process's resident set from /proc, in MiB.
func rssMB(pid int) float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return -1
}

// openFDs counts a process's open descriptors.
func openFDs(pid int) int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(es)
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}
