package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/admission"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/testenv"
)

// limitedGateway is a gateway with admission rules in front of one
// simulator channel per protocol. Its key "client" is in group "g".
func limitedGateway(t *testing.T, rules ...admission.Rule) (*httptest.Server, *records, *admission.Limiter) {
	t.Helper()
	up, _ := upstream(t, nil)
	l, err := admission.New(rules, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	chans := []*route.Channel{channel("sim-openai", "openai", up.URL, fastTimeouts),
		channel("sim-anthropic", "anthropic", up.URL, fastTimeouts), channel("sim-gemini", "gemini", up.URL, fastTimeouts)}
	g := relay.New(relay.Options{Router: route.NewRouter(chans, 1), Keys: keys, Recorder: recs,
		UserHashKey: []byte("0123456789abcdef"), Admission: l, Diagnose: diagnose.New(config.Diagnosis{}).Diagnose})
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ConnContext = relay.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, recs, l
}

// TestAdmissionTokenLimit: a key at its token limit gets 429 in each
// protocol's own error format, with Retry-After and the limit named; its
// record is rate_limited with no attempt (no channel is charged), and the
// tokens charged are the answer's usage, not the prompt's estimate.
func TestAdmissionTokenLimit(t *testing.T) {
	t.Parallel()
	gw, recs, l := limitedGateway(t, admission.Rule{Scope: admission.ScopeKey, Match: "client", TokensPerMinute: 60})
	// "fast" answers 60 visible tokens: its prompt's estimate (about 10)
	// passes, and only the usage it reports (about 70 in all) leaves no
	// room for a second request.
	resp, body := do(t, gw.URL, clientKey, call{api: "chat", model: "fast", stream: true})
	if resp.StatusCode != 200 {
		t.Fatalf("first request: %d %s", resp.StatusCode, body)
	}
	first := recs.get(t, resp.Header.Get("X-Request-Id"))
	if first.Tokens.Input == nil || first.Tokens.Output == nil || *first.Tokens.Input+*first.Tokens.Output < 60 {
		t.Fatalf("first request's tokens %+v", first.Tokens)
	}
	for _, c := range []struct {
		api  string
		want func(body map[string]any) bool
	}{
		{"chat", func(b map[string]any) bool {
			e, _ := b["error"].(map[string]any)
			return e["type"] == "rate_limit_error" && e["code"] == "rate_limit_exceeded" && strings.Contains(e["message"].(string), "key:client tokens_per_minute")
		}},
		{"responses", func(b map[string]any) bool {
			e, _ := b["error"].(map[string]any)
			return e["code"] == "rate_limit_exceeded"
		}},
		{"anthropic", func(b map[string]any) bool {
			e, _ := b["error"].(map[string]any)
			return b["type"] == "error" && e["type"] == "rate_limit_error" && strings.Contains(e["message"].(string), "key:client")
		}},
		{"gemini", func(b map[string]any) bool {
			e, _ := b["error"].(map[string]any)
			return e["code"] == float64(429) && e["status"] == "RESOURCE_EXHAUSTED" && strings.Contains(e["message"].(string), "tokens_per_minute")
		}},
	} {
		resp, body := do(t, gw.URL, clientKey, call{api: c.api, model: "fast", stream: true})
		var b map[string]any
		json.Unmarshal(body, &b)
		if resp.StatusCode != 429 || !c.want(b) {
			t.Errorf("%s over the limit: %d %s", c.api, resp.StatusCode, body)
		}
		ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if err != nil || ra < 1 || ra > 60 {
			t.Errorf("%s: Retry-After %q", c.api, resp.Header.Get("Retry-After"))
		}
		if got := resp.Header.Get("X-Ttfx-Rate-Limit"); got != "key:client tokens_per_minute" {
			t.Errorf("%s: X-Ttfx-Rate-Limit %q", c.api, got)
		}
		rec := recs.get(t, resp.Header.Get("X-Request-Id"))
		if rec.Status != record.StatusRateLimited || rec.HTTPStatus != 429 || len(rec.Attempts) != 0 || rec.Channel != "" ||
			len(rec.Diagnosis) == 0 || rec.Diagnosis[0] != record.StatusRateLimited {
			t.Errorf("%s record: status %s http %d attempts %d channel %q diagnosis %v", c.api, rec.Status, rec.HTTPStatus, len(rec.Attempts), rec.Channel, rec.Diagnosis)
		}
	}
	st := l.Stats()
	if len(st) != 1 || st[0].Admitted != 1 || st[0].Rejected != 4 {
		t.Errorf("stats %+v", st)
	}
}

// TestAdmissionQueue: with a queue, a request over a concurrency limit
// waits for a stream to end, is served, and its record has
// admission_wait_ms and the "admission" verdict first.
func TestAdmissionQueue(t *testing.T) {
	t.Parallel()
	gw, recs, _ := limitedGateway(t, admission.Rule{Scope: admission.ScopeGroup, Match: "g", Concurrent: 1, Queue: 10 * time.Second})
	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i := range 2 {
		wg.Go(func() {
			// "fast" takes about 420 ms: the second waits for the first.
			resp, _ := do(t, gw.URL, clientKey, call{api: "chat", model: "fast", stream: true})
			if resp.StatusCode != 200 {
				t.Errorf("request %d: %d", i, resp.StatusCode)
			}
			ids[i] = resp.Header.Get("X-Request-Id")
		})
	}
	wg.Wait()
	var waits []float64
	var queued record.Record
	for _, id := range ids {
		rec := recs.get(t, id)
		if w, ok := rec.AdmissionWaitMs.Ms(); ok {
			waits = append(waits, w)
			queued = rec
		}
	}
	if len(waits) != 1 {
		t.Fatalf("admission waits %v, want one request queued", waits)
	}
	// It waited for the first stream's whole length (~420 ms).
	total, _ := queued.TotalHandlerMs.Ms()
	if waits[0] < 200 || waits[0] > total {
		t.Errorf("admission_wait_ms %.0f of a total %.0f; want the first stream's length", waits[0], total)
	}
	if len(queued.Diagnosis) == 0 || queued.Diagnosis[0] != diagnose.Admission {
		t.Errorf("diagnosis %v, want admission first", queued.Diagnosis)
	}
}

// TestAdmissionSDKErrors: the official SDKs see a gateway's 429 as their
// own rate-limit errors (openai-node RateLimitError, Anthropic's
// RateLimitError, @google/genai ApiError 429), with retry-after.
func TestAdmissionSDKErrors(t *testing.T) {
	t.Parallel()
	dir, _ := filepath.Abs("../../testdata/sdk-node")
	node, err := exec.LookPath("node")
	if err != nil {
		testenv.Missing(t, "node", "Node.js 20 or later on PATH")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai")); err != nil {
		testenv.Missing(t, "the Node SDKs", "run `npm ci --prefix testdata/sdk-node`")
	}
	gw, _, _ := limitedGateway(t, admission.Rule{Scope: admission.ScopeKey, Match: "client", RequestsPerMinute: 1})
	if resp, _ := do(t, gw.URL, clientKey, call{api: "chat", model: "fast"}); resp.StatusCode != 200 {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "ratelimit.mjs", gw.URL, clientKey)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node ratelimit.mjs: %v\n%s", err, stderr.String())
	}
	var got map[string]struct {
		Class      string `json:"class"`
		Status     int    `json:"status"`
		RetryAfter string `json:"retryAfter"`
		Message    string `json:"message"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for sdk, class := range map[string]string{"openai": "RateLimitError", "anthropic": "RateLimitError", "genai": "ApiError"} {
		g := got[sdk]
		if g.Class != class || g.Status != 429 || !strings.Contains(g.Message, "key:client requests_per_minute") {
			t.Errorf("%s: %+v, want %s 429 naming the limit", sdk, g, class)
		}
		if sdk != "genai" && g.RetryAfter == "" {
			t.Errorf("%s: no retry-after seen: %+v", sdk, g)
		}
	}
}
