package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/wire"
)

// A toy provider, registered only here, proves that adding a provider to
// the simulator touches its own unit and one registration: a client-facing
// API (its wire endpoint, its reading of bodies, its encoder and its error
// format) and a provider kind (its URL form, credential check, rewriting
// writer, rate-limit headers and token endpoint), none of which this
// package names.

const toyAPI = "toy.lines"

func init() {
	wire.RegisterAPI(&wire.API{Name: toyAPI, Family: "toy",
		Endpoints: []wire.Endpoint{{Pattern: "POST /toy/v1/lines", HasBody: true}},
		ErrorBody: func(e protocol.ErrorResponse) []byte {
			return []byte(`{"toy_error":` + strconv.Quote(e.Message) + `,"status":` + strconv.Itoa(e.Status) + `}`)
		},
		StreamError: func(f wire.Failure) []byte { return []byte("!error " + f.Msg + "\n") },
	})
	sim.Register(&sim.Unit{
		API: toyAPI,
		Read: func(b sim.Body, req *sim.Request) ([]string, *sim.Error) {
			if !b.Has("lines") {
				return nil, b.Missing("lines")
			}
			return []string{"lines"}, b.Array("lines", true)
		},
		NewEncoder: func(r *sim.Response) sim.Encoder { return &toyEncoder{r: r} },
		Missing:    func(name string) string { return "toy wants " + name },
		RateHeaders: func(h http.Header, rs sim.RateState) {
			for _, l := range rs.Limits {
				h.Set("Toy-Left-"+l.Name, strconv.FormatInt(l.Remaining, 10))
			}
		},
	})
	sim.RegisterKind(&sim.Kind{Name: "toycloud",
		Routes: []sim.Route{{
			Path: "/toycloud/{region}/models/{model}/lines", API: toyAPI, Model: "model",
			Accept: func(c *sim.Call) *sim.Error {
				if c.R.Header.Get("Toy-Key") != "sesame" {
					return sim.CodedError(http.StatusForbidden, "toy_denied", "toycloud wants Toy-Key")
				}
				return nil
			},
			Wrap: func(w http.ResponseWriter, api sim.API) http.ResponseWriter { return &toyWriter{w} },
		}},
		Endpoints: []sim.Endpoint{{Path: "/toycloud/token", Serve: func(s *sim.Server, w http.ResponseWriter, r *http.Request) {
			s.IssueToken(w, "toy", "toy-client")
		}}},
	})
}

// toyEncoder writes one "line" per step that carries text, and "end".
type toyEncoder struct{ r *sim.Response }

func (e *toyEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepText:
		return append(append(append(dst, "line "...), st.Text...), '\n')
	case sim.StepFinish:
		return append(dst, "end\n"...)
	}
	return dst
}

func (e *toyEncoder) Body() []byte { return []byte("all " + e.r.VisibleText + "\n") }

// toyWriter is the kind's rewriting of the API's bytes: upper case.
type toyWriter struct{ http.ResponseWriter }

func (w *toyWriter) Write(p []byte) (int, error) {
	if _, err := w.ResponseWriter.Write([]byte(strings.ToUpper(string(p)))); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *toyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestToyProviderServed(t *testing.T) {
	infos := make(chan sim.Info, 10)
	srv := httptest.NewServer(sim.New(sim.Options{
		Profiles: map[string]sim.Profile{"toy-model": {HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 6, TPS: 1000, TokensPerEvent: 2,
			RateLimit: &sim.RateLimit{RequestsPerMinute: 100}}},
		OnRequest: func(in sim.Info) { infos <- in },
	}))
	defer srv.Close()
	post := func(path, body string, h map[string]string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", srv.URL+path, strings.NewReader(body))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}

	// The API's own endpoint, streaming: the toy's encoder, its rate-limit
	// headers.
	resp, body := post("/toy/v1/lines", `{"model":"toy-model","stream":true,"lines":["hi"]}`, nil)
	if resp.StatusCode != 200 || strings.Count(body, "line ") != 3 || !strings.HasSuffix(body, "end\n") {
		t.Fatalf("stream: %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Toy-Left-requests") != "99" || resp.Header.Get("X-Ratelimit-Remaining-requests") != "" {
		t.Errorf("rate-limit headers: %v", resp.Header)
	}
	if in := <-infos; in.API != toyAPI || in.Model != "toy-model" || !in.Stream || in.VisibleSent != 6 {
		t.Errorf("info: %+v", in)
	}
	// Its errors in its format, its words for a missing member.
	resp, body = post("/toy/v1/lines", `{"model":"toy-model"}`, nil)
	var e struct {
		Msg    string `json:"toy_error"`
		Status int    `json:"status"`
	}
	if resp.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Msg != "toy wants lines" {
		t.Errorf("missing member: %d %s", resp.StatusCode, body)
	}
	// The kind's URL form: refused without its credential, in the API's
	// format; served with it, the model from the path, through its writer.
	resp, body = post("/toycloud/eu/models/toy-model/lines", `{"lines":["hi"]}`, nil)
	if resp.StatusCode != 403 || json.Unmarshal([]byte(body), &e) != nil || e.Msg != "toycloud wants Toy-Key" {
		t.Errorf("kind refusal: %d %s", resp.StatusCode, body)
	}
	resp, body = post("/toycloud/eu/models/toy-model/lines", `{"lines":["hi"]}`, map[string]string{"Toy-Key": "sesame"})
	if resp.StatusCode != 200 || !strings.HasPrefix(body, "ALL ") || body != strings.ToUpper(body) {
		t.Errorf("kind route: %d %q", resp.StatusCode, body)
	}
	// The kind's endpoint.
	resp, body = post("/toycloud/token", "", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, `"access_token":"sim.`) {
		t.Errorf("token endpoint: %d %s", resp.StatusCode, body)
	}
	// What `ttfx sim --help` lists names both.
	served := map[string]string{}
	for _, sv := range sim.ServedPaths() {
		served[sv.Name] = strings.Join(sv.Paths, " ")
	}
	if served[toyAPI] != "/toy/v1/lines" || served["kind toycloud"] != "/toycloud/{region}/models/{model}/lines /toycloud/token" {
		t.Errorf("ServedPaths: %q", served)
	}
}
