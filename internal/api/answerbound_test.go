package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
)

// TestStatsAnswerBounded: an answer whose groups × buckets × fields pass
// the bound is refused with a 400 that names the bound and what fits —
// on its buckets before anything is read, on its groups as they are met
// (issue 50: since=6d&bucket=1m&group_by=model took a gateway from 34 to
// 435 MB of RSS for a 26 MB answer).
func TestStatsAnswerBounded(t *testing.T) {
	srv, _ := fixture(t)
	a := call(t, "GET", srv.URL+"/api/stats?since=6d&bucket=1m&group_by=model", keyAdmin)
	if a.status != 400 || !strings.Contains(string(a.body), "16000") || !strings.Contains(string(a.body), "a bucket of 15m fits") {
		t.Fatalf("6 days of 1-minute buckets, every field: %d %s", a.status, a.body)
	}
	if typ := errorType(t, a); typ != TypeInvalidRequest {
		t.Errorf("type %s", typ)
	}
	for _, ok := range []string{"/api/stats?since=6d&bucket=15m&group_by=model", "/api/stats?since=6d&bucket=1m&group_by=model&fields=first_text_delta_ms"} {
		if a := call(t, "GET", srv.URL+ok, keyAdmin); a.status != 200 {
			t.Errorf("%s, which fits: %d %s", ok, a.status, a.body)
		}
	}

	// The groups are known as they are met: 300 models × 1 field past a
	// bound of 200 values, from rollups and from rows alike.
	s := openSQLite(t)
	var recs []record.Record
	for i := range 300 {
		r := rec(fmt.Sprintf("req-m%d", i), "team-a", "client-a", now.Add(-time.Duration(i)*time.Second))
		r.Model = fmt.Sprintf("model-%03d", i)
		recs = append(recs, r)
	}
	if err := s.Insert(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: s, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }, MaxAnswerValues: 200})
	small := httptest.NewServer(h)
	t.Cleanup(small.Close)
	for _, path := range []string{
		"/api/stats?since=1h&group_by=model&fields=first_text_delta_ms",
		"/api/stats?since=1h&group_by=model&fields=first_text_delta_ms&key_name=client-a",
	} {
		a := call(t, "GET", small.URL+path, keyAdmin)
		if a.status != 400 || !strings.Contains(string(a.body), "passed the bound of 200 values") {
			t.Errorf("%s: %d %s, want 400 naming the bound", path, a.status, a.body)
		}
	}
	if a := call(t, "GET", small.URL+"/api/stats?since=1h&fields=first_text_delta_ms", keyAdmin); a.status != 200 || statsCount(t, a) != 300 {
		t.Errorf("one group: %d %s", a.status, a.body)
	}
}

// TestStatsCallMemory: the largest answers the bound lets through, over
// 20,000 records spread across 6 days and 8 models, grow the heap by at
// most 64 MiB each.
func TestStatsCallMemory(t *testing.T) {
	s := openSQLite(t)
	start := now.Add(-6 * 24 * time.Hour)
	var batch []record.Record
	for i := range 20_000 {
		r := rec(fmt.Sprintf("req-%d", i), "team-a", "client-a", start.Add(time.Duration(i)*(6*24*time.Hour/20_000)))
		r.Model = fmt.Sprintf("model-%d", i%8)
		batch = append(batch, r)
		if len(batch) == 1000 {
			if err := s.Insert(context.Background(), batch); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	h := New(Options{Store: s, Resolve: KeyringResolver(keyring()), Now: func() time.Time { return now }})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	for _, path := range []string{
		"/api/stats?since=6d&bucket=1m&group_by=model",                               // refused before reading
		"/api/stats?since=6d&bucket=1h&group_by=model",                               // 144 × 8 × 14 = 16,128: refused as the groups come
		"/api/stats?since=6d&bucket=6h&group_by=model",                               // 24 × 8 × 14 values
		"/api/stats?since=6d&bucket=1m&group_by=model&fields=first_text_delta_ms",    // up to 8,640 buckets × 8 models: refused as the groups come
		"/api/stats?since=6d&bucket=15m&group_by=model&fields=first_text_delta_ms",   // 576 × 8
		"/api/stats?since=6d&bucket=61s&group_by=model&fields=first_text_delta_ms",   // rows: refused as the groups come
		"/api/stats?since=6d&bucket=3601s&group_by=model&fields=first_text_delta_ms", // rows, 144 × 8
	} {
		runtime.GC()
		base := heapNow()
		stop := heapPeak()
		a := call(t, "GET", srv.URL+path, keyViewerA)
		grew := int64(stop()) - int64(base)
		t.Logf("%s: %d, %d KB answer, heap grew %d MiB", path, a.status, len(a.body)>>10, grew>>20)
		if a.status != 200 && a.status != 400 {
			t.Errorf("%s: %d %s", path, a.status, a.body)
		}
		if grew > 64<<20 {
			t.Errorf("%s: the heap grew %d MiB, want at most 64", path, grew>>20)
		}
	}
}

func heapNow() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapPeak samples the heap every millisecond until stop is called.
func heapPeak() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := heapNow(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

var _ = store.DefaultMaxAnswerValues
