package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sim"
)

// TestAzureClientPaths: the gateway answers Azure OpenAI's client-facing
// paths (the deployment form with api-version, /openai/responses, and the
// v1 form) as the OpenAI operations they are. The deployment is the model
// asked for: it goes through aliases and routing, and the upstream body
// names it (added when the client's body has none). A channel of kind
// openai gets OpenAI's own path without the client's api-version; one of
// kind azure its resource's path with its own. The key may come in
// api-key or as a bearer. Bad requests, unknown paths and wrong methods
// under /openai/ get OpenAI's error format, and every request a record on
// Azure's route.
func TestAzureClientPaths(t *testing.T) {
	t.Parallel()
	type seen struct {
		uri  string
		body map[string]any
	}
	var mu sync.Mutex
	got := map[string]seen{} // by X-Request-Id
	simH := sim.New(sim.Options{Profiles: sim.Builtin()})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		mu.Lock()
		got[r.Header.Get("X-Request-Id")] = seen{r.URL.RequestURI(), m}
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		simH.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	oa := channel("oa", "openai", up.URL, fastTimeouts)
	oa.Models = []string{"dep-oa", "status-429"}
	oa.Upstream = map[string]string{"dep-oa": "fast"}
	az := channel("az", "azure", up.URL+"?api-version=2024-10-21", fastTimeouts)
	az.Models = []string{"dep-az", "flaky"}
	az.Upstream = map[string]string{"dep-az": "fast"}
	gw, recs := gateway(t, oa, az)

	const q = "?api-version=2024-10-21"
	chatBody := `{"messages":[{"role":"user","content":"Say hello."}],"stream":true}`
	for _, tt := range []struct {
		name, path, body string
		bearer           bool
		code             int
		route, api       string
		channel, model   string
		upstreamURI      string // what the provider was asked
		upstreamModel    string // the body's model upstream; "" none checked
		status           string
		inReply          string
	}{
		{"deployment chat stream, no model in the body, to openai", "/openai/deployments/dep-oa/chat/completions" + q, chatBody, false,
			200, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "oa", "dep-oa",
			"/v1/chat/completions", "fast", record.StatusOK, "[DONE]"},
		{"deployment chat, another model in the body, bearer", "/openai/deployments/dep-oa/chat/completions" + q,
			`{"model":"ignored","messages":[{"role":"user","content":"x"}]}`, true,
			200, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "oa", "dep-oa",
			"/v1/chat/completions", "fast", record.StatusOK, `"chat.completion"`},
		{"deployment chat to azure", "/openai/deployments/dep-az/chat/completions" + q, chatBody, false,
			200, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "az", "dep-az",
			"/openai/deployments/fast/chat/completions?api-version=2024-10-21", "fast", record.StatusOK, "[DONE]"},
		{"deployment completions to azure", "/openai/deployments/dep-az/completions" + q, `{"prompt":"Say hello."}`, false,
			200, "POST /openai/deployments/{deployment}/completions", "openai.completions", "az", "dep-az",
			"/openai/deployments/fast/completions?api-version=2024-10-21", "fast", record.StatusOK, `"text_completion"`},
		{"deployment embeddings to openai", "/openai/deployments/dep-oa/embeddings" + q, `{"input":"hello"}`, false,
			200, "POST /openai/deployments/{deployment}/embeddings", "openai.embeddings", "oa", "dep-oa",
			"/v1/embeddings", "fast", record.StatusOK, `"embedding"`},
		{"deployment responses to azure", "/openai/deployments/dep-az/responses?api-version=2025-04-01-preview", `{"input":"Say hello.","stream":true}`, true,
			200, "POST /openai/deployments/{deployment}/responses", "openai.responses", "az", "dep-az",
			"/openai/responses?api-version=2024-10-21", "fast", record.StatusOK, "response.completed"},
		{"responses to openai", "/openai/responses" + q, `{"model":"dep-oa","input":"Say hello."}`, false,
			200, "POST /openai/responses", "openai.responses", "oa", "dep-oa",
			"/v1/responses", "fast", record.StatusOK, `"completed"`},
		{"v1 chat to azure", "/openai/v1/chat/completions?api-version=v1", `{"model":"dep-az","messages":[{"role":"user","content":"x"}]}`, false,
			200, "POST /openai/v1/chat/completions", "openai.chat", "az", "dep-az",
			"/openai/deployments/fast/chat/completions?api-version=2024-10-21", "fast", record.StatusOK, `"chat.completion"`},
		{"v1 embeddings to openai", "/openai/v1/embeddings", `{"model":"dep-oa","input":["a","b"]}`, true,
			200, "POST /openai/v1/embeddings", "openai.embeddings", "oa", "dep-oa",
			"/v1/embeddings", "fast", record.StatusOK, `"embedding"`},
		{"429 from the provider", "/openai/deployments/status-429/chat/completions" + q, `{"messages":[{"role":"user","content":"x"}]}`, false,
			429, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "oa", "status-429",
			"/v1/chat/completions", "status-429", record.StatusRateLimited, `"error"`},
		{"stream cut", "/openai/deployments/flaky/chat/completions" + q, chatBody, false,
			200, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "az", "flaky",
			"/openai/deployments/flaky/chat/completions?api-version=2024-10-21", "flaky", record.StatusUpstreamStreamError, ""},
		{"no channel serves the deployment", "/openai/deployments/nope/chat/completions" + q, `{"messages":[]}`, false,
			404, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "", "nope", "", "", record.StatusNoChannel, `"model_not_found"`},
		{"body not JSON", "/openai/deployments/dep-oa/chat/completions" + q, `{"messages":`, false,
			400, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "", "", "", "", record.StatusBadRequest, `"invalid_request_error"`},
		{"body not an object", "/openai/deployments/dep-oa/embeddings" + q, `["x"]`, false,
			400, "POST /openai/deployments/{deployment}/embeddings", "openai.embeddings", "", "", "", "", record.StatusBadRequest, `"invalid_request_error"`},
		{"deployment too long", "/openai/deployments/" + strings.Repeat("d", 2000) + "/chat/completions" + q, `{}`, false,
			400, "POST /openai/deployments/{deployment}/chat/completions", "openai.chat", "", "", "", "", record.StatusBadRequest, "bytes long"},
		{"unknown path under /openai/", "/openai/deployments/dep-oa/images/generations" + q, `{}`, false,
			404, "", "openai.chat", "", "", "", "", record.StatusBadRequest, `"unknown_url"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", gw.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.bearer {
				req.Header.Set("Authorization", "Bearer "+clientKey)
			} else {
				req.Header.Set("Api-Key", clientKey)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body) // a cut stream ends in an error
			resp.Body.Close()
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.inReply) {
				t.Fatalf("%d %.300s, want %d with %q", resp.StatusCode, body, tt.code, tt.inReply)
			}
			if tt.code >= 400 {
				var e struct {
					Error struct{ Message, Type string } `json:"error"`
				}
				if json.Unmarshal(body, &e) != nil || e.Error.Message == "" || e.Error.Type == "" {
					t.Errorf("error body not in OpenAI's format: %s", body)
				}
				if len(e.Error.Message) > 400 {
					t.Errorf("error message of %d bytes: the client's strings are not bounded", len(e.Error.Message))
				}
			}
			id := resp.Header.Get("X-Request-Id")
			rec := recs.getWithin(t, id, 5*time.Second)
			key := "client" // an unknown path is answered before any key is read
			if tt.route == "" {
				key = ""
			}
			if rec.Route != tt.route || rec.API != tt.api || rec.Channel != tt.channel || rec.Model != tt.model || rec.Status != tt.status || rec.KeyName != key {
				t.Errorf("record route %q api %s channel %q model %q status %s key %q (%s)", rec.Route, rec.API, rec.Channel, rec.Model, rec.Status, rec.KeyName, rec.Error)
			}
			mu.Lock()
			s, ok := got[id]
			mu.Unlock()
			if tt.upstreamURI == "" {
				if ok {
					t.Errorf("the provider was asked %s", s.uri)
				}
				return
			}
			if s.uri != tt.upstreamURI {
				t.Errorf("the provider was asked %q, want %q", s.uri, tt.upstreamURI)
			}
			if m, _ := s.body["model"].(string); m != tt.upstreamModel {
				t.Errorf("the provider's body names model %q, want %q (%v)", m, tt.upstreamModel, s.body)
			}
		})
	}

	// A path the gateway serves with POST answers another method with 405,
	// an Allow header and OpenAI's format.
	resp, err := http.Get(gw.URL + "/openai/deployments/dep-oa/chat/completions" + q)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" || !strings.Contains(string(b), `"method_not_allowed"`) {
		t.Errorf("GET on a deployment path: %d Allow %q %s", resp.StatusCode, resp.Header.Get("Allow"), b)
	}
}
