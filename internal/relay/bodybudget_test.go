package relay_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
)

// heapPeak samples the heap (live and not yet collected objects) every
// millisecond until stop is called, and returns the highest sample.
func heapPeak() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
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

// TestBodyBudgetHoldsMemory: eight and sixteen concurrent 31 MiB bodies
// from one key stay within the gateway's body budget plus a small
// constant (issue 50: eight took RSS from 32 to 615 MiB, sixteen to
// 1,204 MiB). The bodies over the budget wait briefly, and those that
// find no room are answered 503 with Retry-After and recorded. The whole
// process is measured: gateway, upstream and clients share it, so the
// constant covers their buffers too.
func TestBodyBudgetHoldsMemory(t *testing.T) {
	const budget = 128 << 20
	const slack = 48 << 20
	// The upstream reads each body through a small buffer and answers
	// after a pause, so that bodies are held while others arrive.
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(50 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(up.Close)
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("o", "openai", up.URL, fastTimeouts)}, 1),
		Keys: keys, Recorder: recs, BodyBudget: budget, BodyBudgetPerKey: budget, BodyWait: 2 * time.Second})
	mux := http.NewServeMux()
	g.Register(mux)
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)

	prompt := strings.Repeat("x", 31<<20-100)
	body := []byte(`{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}]}`)
	prompt = ""
	for _, n := range []int{8, 16} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			runtime.GC()
			base := heapPeak()()
			stop := heapPeak()
			codes := make([]int, n)
			ids := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+clientKey)
					req.Header.Set("Content-Type", "application/json")
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					codes[i], ids[i] = resp.StatusCode, resp.Header.Get("X-Request-Id")
					if resp.StatusCode == 503 && (resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "budget")) {
						t.Errorf("503 without Retry-After or reason: %s", b)
					}
				}()
			}
			wg.Wait()
			peak := stop()
			bb := g.BodyBudget()
			ok := 0
			for i, c := range codes {
				switch c {
				case 200:
					ok++
				case 503:
					if rec := recs.get(t, ids[i]); rec.Status != record.StatusRateLimited || !strings.Contains(rec.Error, "budget") {
						t.Errorf("503 recorded as %s (%q)", rec.Status, rec.Error)
					}
				default:
					t.Errorf("answer %d", c)
				}
			}
			grew := int64(peak) - int64(base)
			t.Logf("%d × 31 MiB: %d answered, %d refused; heap grew %d MiB at peak (budget %d MiB, counted peak %d MiB)",
				n, ok, n-ok, grew>>20, budget>>20, bb.Peak>>20)
			if ok == 0 {
				t.Error("no body was served")
			}
			if bb.Peak > budget {
				t.Errorf("counted %d bytes at once, over the budget %d", bb.Peak, budget)
			}
			if grew > budget+slack {
				t.Errorf("heap grew %d MiB, want at most the budget %d MiB + %d MiB", grew>>20, budget>>20, slack>>20)
			}
		})
	}
}

// TestBodyBudgetPerKey: one key's bodies cannot take the whole budget: a
// second key is served while the first holds its share.
func TestBodyBudgetPerKey(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.Contains(r.Header.Get("User-Agent"), "hog") {
			held.Add(1)
			<-release
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	}))
	t.Cleanup(up.Close)
	keys := auth.NewKeyring([]auth.Entry{
		{Principal: auth.Principal{Name: "hog", Role: auth.RoleClient}, Hash: auth.HashKey("hog-key-0123456789")},
		{Principal: auth.Principal{Name: "other", Role: auth.RoleClient}, Hash: auth.HashKey("other-key-0123456789")},
	})
	g := relay.New(relay.Options{Router: route.NewRouter([]*route.Channel{channel("o", "openai", up.URL, fastTimeouts)}, 1),
		Keys: keys, BodyBudget: 8 << 20, BodyBudgetPerKey: 4 << 20, BodyWait: 200 * time.Millisecond})
	mux := http.NewServeMux()
	g.Register(mux)
	gw := httptest.NewServer(mux)
	t.Cleanup(gw.Close)
	t.Cleanup(func() { close(release) }) // before the servers close: they wait for the held request
	send := func(key, ua string) (int, string) {
		body := `{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("y", 3<<20) + `"}]}`
		req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("User-Agent", ua)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0, ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	go send("hog-key-0123456789", "hog")
	deadline := time.Now().Add(10 * time.Second)
	for held.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	// The hog's second body passes its share: refused after the wait.
	if code, b := send("hog-key-0123456789", "hog2"); code != 503 || !strings.Contains(b, "per key") {
		t.Errorf("the hog's second body: %d %.200s, want 503", code, b)
	}
	// Another key still has room.
	if code, b := send("other-key-0123456789", "other"); code != 200 {
		t.Errorf("another key while the hog holds its share: %d %.200s", code, b)
	}
	if r := g.BodyBudget().Refused; r != 1 {
		t.Errorf("refused %d, want 1", r)
	}
}
