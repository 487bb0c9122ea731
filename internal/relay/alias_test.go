package relay_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestModelAliases: a channel that knows a model by another name gets that
// name — in the body (every API with the model in it, the usage option
// spliced beside it), in the path (Gemini), in the deployment URL (Azure)
// — with every other byte of the client's body unchanged; the record keeps
// both names, and a name the channel does not map goes through as asked.
func TestModelAliases(t *testing.T) {
	type seen struct {
		path string
		body []byte
	}
	var mu sync.Mutex
	var last seen
	capture := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			last = seen{r.URL.Path, b}
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
			h.ServeHTTP(w, r)
		})
	}
	simH := sim.New(sim.Options{Profiles: sim.Builtin()})
	up := httptest.NewServer(capture(simH))
	t.Cleanup(up.Close)

	oai := channel("oai", "openai", up.URL, fastTimeouts)
	oai.Models = []string{"gpt-4o", "plain", "team-*", "*-mini"}
	oai.Upstream = map[string]string{"gpt-4o": "fast", "team-*": "*", "*-mini": "fast"}
	ant := channel("ant", "anthropic", up.URL, fastTimeouts)
	ant.Models = []string{"claude-*"}
	ant.Upstream = map[string]string{"claude-*": "fast"}
	gem := channel("gem", "gemini", up.URL, fastTimeouts)
	gem.Models = []string{"flash"}
	gem.Upstream = map[string]string{"flash": "fast"}
	az := channel("az", "azure", up.URL+"?api-version=2024-10-21", fastTimeouts)
	az.Models = []string{"az-gpt"}
	az.Upstream = map[string]string{"az-gpt": "fast"}
	gw, recs := gateway(t, oai, ant, gem, az)

	for _, tt := range []struct {
		name      string
		c         call
		upstream  string // the model the provider should see
		inPath    string // the path the provider should see
		usageSent bool   // the gateway splices stream_options into the body too
	}{
		{"chat stream", call{"chat", "gpt-4o", true}, "fast", "/v1/chat/completions", true},
		{"chat", call{"chat", "gpt-4o", false}, "fast", "/v1/chat/completions", false},
		{"completions stream", call{"completions", "gpt-4o", true}, "fast", "/v1/completions", true},
		{"responses", call{"responses", "gpt-4o", true}, "fast", "/v1/responses", false},
		{"glob with *", call{"chat", "team-fast", true}, "fast", "/v1/chat/completions", true},
		{"glob to one name", call{"chat", "o4-mini", false}, "fast", "/v1/chat/completions", false},
		{"anthropic", call{"anthropic", "claude-x", true}, "fast", "/v1/messages", false},
		{"gemini path", call{"gemini", "flash", true}, "", "/v1beta/models/fast:streamGenerateContent", false},
		{"unmapped", call{"chat", "plain", false}, "plain", "/v1/chat/completions", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := do(t, gw.URL, clientKey, tt.c)
			rec := recs.get(t, resp.Header.Get("X-Request-Id"))
			mu.Lock()
			got := last
			mu.Unlock()
			if got.path != tt.inPath {
				t.Errorf("upstream path %s, want %s", got.path, tt.inPath)
			}
			served := tt.upstream
			if served == "" {
				served = "fast"
			}
			if rec.Model != tt.c.model || rec.UpstreamModel != served {
				t.Errorf("record model %q upstream_model %q, want %q and %q", rec.Model, rec.UpstreamModel, tt.c.model, served)
			}
			if tt.c.model != "plain" && (resp.StatusCode != 200 || rec.Status != record.StatusOK) {
				t.Fatalf("%d %s, record %s", resp.StatusCode, b, rec.Status)
			}
			// The body the provider got is the client's, with only the
			// model's value (and the usage option) changed.
			req := tt.c.request(t.Context(), "http://x", clientKey)
			clientBody, _ := io.ReadAll(req.Body)
			want := clientBody
			if tt.upstream != "" {
				want = bytes.Replace(clientBody, []byte(`"model":"`+tt.c.model+`"`), []byte(`"model":"`+tt.upstream+`"`), 1)
			}
			if tt.usageSent {
				want = append(want[:len(want)-1:len(want)-1], `,"stream_options":{"include_usage":true}}`...)
			}
			if !bytes.Equal(got.body, want) {
				t.Errorf("upstream body\n%s\nwant\n%s", got.body, want)
			}
		})
	}

	// Azure: the provider's name is the deployment in the URL (and the
	// body's model).
	resp, b := do(t, gw.URL, clientKey, call{"chat", "az-gpt", true})
	rec := recs.get(t, resp.Header.Get("X-Request-Id"))
	mu.Lock()
	got := last
	mu.Unlock()
	if resp.StatusCode != 200 || rec.Status != record.StatusOK || got.path != "/openai/deployments/fast/chat/completions" ||
		!strings.Contains(string(got.body), `"model":"fast"`) || rec.UpstreamModel != "fast" || rec.Model != "az-gpt" || rec.Channel != "az" {
		t.Fatalf("azure alias: %d %s; upstream %s %s; record %s %q→%q", resp.StatusCode, b, got.path, got.body, rec.Status, rec.Model, rec.UpstreamModel)
	}
}
