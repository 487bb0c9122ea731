package relay

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/ttfx/ttfx/internal/jsonscan"
)

// pathModelEndpoint is an endpoint that names the model in its path, as
// Azure's deployment paths do (wire.Endpoint.Model).
var pathModelEndpoint = endpoint{hasBody: true, usage: true, path: "/v1/chat/completions", modelVar: "deployment", dropQuery: []string{"api-version"}}

// TestPathModel: the deployment in the path is the request's model; the
// body the upstream gets names it (the client's "model" replaced, or one
// added), then the channel's name for it (an alias); the usage option is
// spliced beside it; the client's own body is left as it was. The
// upstream path is the API's own, without the client's api-version.
func TestPathModel(t *testing.T) {
	for _, tt := range []struct{ body, want, alias string }{
		{`{"model":"dep","stream":true}`, `{"model":"dep","stream":true,"stream_options":{"include_usage":true}}`,
			`{"model":"prod-dep","stream":true,"stream_options":{"include_usage":true}}`},
		{`{"messages":[],"stream":true}`, `{"model":"dep","messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
			`{"model":"prod-dep","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{` { "model" : "other", "messages":[]}`, ` { "model" :"dep", "messages":[]}`, ` { "model" :"prod-dep", "messages":[]}`},
		{`{}`, `{"model":"dep"}`, `{"model":"prod-dep"}`},
		{"\t{\n}", "\t{\"model\":\"dep\"\n}", "\t{\"model\":\"prod-dep\"\n}"},
	} {
		r := httptest.NewRequest("POST", "/openai/deployments/dep/chat/completions?api-version=2024-10-21&x=1", nil)
		r.SetPathValue("deployment", "dep")
		orig := []byte(tt.body)
		cr, herr := parseRequest(pathModelEndpoint, r, bytes.Clone(orig))
		if herr != nil {
			t.Fatalf("%s: %v", tt.body, herr)
		}
		if cr.model != "dep" || cr.upstreamURI != "/v1/chat/completions?x=1" {
			t.Errorf("%s: model %q, upstream %q", tt.body, cr.model, cr.upstreamURI)
		}
		for _, c := range []struct{ model, want string }{{"", tt.want}, {"dep", tt.want}, {"prod-dep", tt.alias}} {
			p, _, ok := cr.payloadFor(false, c.model)
			if got := string(p.bytes()); !ok || got != c.want {
				t.Errorf("%s as %q: upstream body %s, want %s", tt.body, c.model, got, c.want)
			}
		}
		if !bytes.Equal(cr.body, orig) {
			t.Errorf("%s: the client's body was changed: %s", tt.body, cr.body)
		}
	}
	// The path's model is checked as a body's is.
	r := httptest.NewRequest("POST", "/openai/deployments/x/chat/completions", nil)
	r.SetPathValue("deployment", "bad\x00name")
	if _, herr := parseRequest(pathModelEndpoint, r, []byte(`{}`)); herr == nil || herr.Code != 400 {
		t.Errorf("a deployment with a control character: %v, want 400", herr)
	}
}

// TestPatternMatches: the paths an endpoint pattern serves, for the Allow
// header of a 405.
func TestPatternMatches(t *testing.T) {
	for _, tt := range []struct {
		pat, path string
		want      bool
	}{
		{"/v1/chat/completions", "/v1/chat/completions", true},
		{"/v1/chat/completions", "/v1/chat/completion", false},
		{"/v1beta/models/{target}", "/v1beta/models/m:generateContent", true},
		{"/v1beta/models/{target}", "/v1beta/models/", false},
		{"/v1beta/models/{target}", "/v1beta/models/a/b", false},
		{"/openai/deployments/{deployment}/chat/completions", "/openai/deployments/d-1/chat/completions", true},
		{"/openai/deployments/{deployment}/chat/completions", "/openai/deployments//chat/completions", false},
		{"/openai/deployments/{deployment}/chat/completions", "/openai/deployments/d/embeddings", false},
		{"/openai/deployments/{deployment}/chat/completions", "/openai/deployments/d/chat/completions/x", false},
	} {
		if got := patternMatches(tt.pat, tt.path); got != tt.want {
			t.Errorf("patternMatches(%q, %q) = %v", tt.pat, tt.path, got)
		}
	}
}

// FuzzPathModel: whatever the deployment and the body, a request the
// gateway accepts sends upstream a valid JSON object whose one "model"
// member is the model asked for (or the channel's name for it), and leaves
// the client's bytes as they were.
func FuzzPathModel(f *testing.F) {
	f.Add("dep", []byte(`{"model":"dep","stream":true}`))
	f.Add("d", []byte(`{"messages":[{"role":"user","content":"hi"}]}`))
	f.Add("x y", []byte(` {"model":"other","stream":true,"stream_options":{"include_usage":false}} `))
	f.Add("é", []byte(`{}`))
	f.Add("d", []byte(`{"model":1}`))
	f.Add("d", []byte(`[]`))
	f.Fuzz(func(t *testing.T, dep string, body []byte) {
		if dep == "" { // a ServeMux wildcard never matches an empty segment
			return
		}
		r := httptest.NewRequest("POST", "/openai/deployments/d/chat/completions", nil)
		r.SetPathValue("deployment", dep)
		orig := bytes.Clone(body)
		cr, herr := parseRequest(pathModelEndpoint, r, body)
		if herr != nil {
			return
		}
		if cr.model != dep {
			t.Fatalf("model %q, want the path's %q", cr.model, dep)
		}
		for _, name := range []string{"", "alias\"\\x"} {
			p, _, _ := cr.payloadFor(false, name)
			got := p.bytes()
			want := dep
			if name != "" {
				want = name
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(got, &m); err != nil {
				t.Fatalf("upstream body %q is not a JSON object: %v", got, err)
			}
			var model string
			if err := json.Unmarshal(m["model"], &model); err != nil || model != want {
				t.Fatalf("upstream body %q names model %q (%v), want %q", got, model, err, want)
			}
			if herr := checkDuplicateKeys(got); herr != nil {
				t.Fatalf("upstream body %q: %v", got, herr.Msg)
			}
			if d := jsonscan.New(got); !d.Skip() || !d.End() {
				t.Fatalf("upstream body %q does not scan", got)
			}
		}
		if !bytes.Equal(body, orig) {
			t.Fatalf("the client's body changed: %q → %q", orig, body)
		}
	})
}
