// Package request builds the benchmark client's requests in the wire
// format of each client-facing API: the Wire a run sends, and the registry
// of the APIs it speaks, which each API's unit fills (internal/provider/<name>
// registers its side in init). It is apart from internal/bench so that
// the units can register with it while bench's own tests link the gateway,
// which links the units.
package request

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
)

// Wire builds the requests of a run in the wire format of its API.
type Wire struct {
	API    protocol.API
	Base   *url.URL // base URL; a path ending in the API's version (/v1) is used as is
	Model  string
	Key    string // sent the way the API expects it; empty: none
	Stream bool
	// MaxTokens is the output cap (max_completion_tokens, max_output_tokens,
	// max_tokens, maxOutputTokens); 0: none sent.
	MaxTokens int
	// ReasoningEffort is sent as the API names its reasoning effort (a
	// word), or its thinking budget for a number where it has one. Empty:
	// none sent.
	ReasoningEffort string
	Tools           json.RawMessage // a JSON array of tool definitions in the API's own format; nil: none
	Sampling        Sampling
	// UserAgent is the User-Agent header; empty: "ttfx-bench".
	UserAgent string
}

// Sampling is the sampling settings of a run; nil: not sent.
type Sampling struct {
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	Seed        *int64   `json:"seed"`
}

// Check reports the first setting the API cannot take.
func (w *Wire) Check() error {
	if w.Base == nil || (w.Base.Scheme != "http" && w.Base.Scheme != "https") || w.Base.Host == "" {
		return errors.New("url: want an http:// or https:// base URL")
	}
	if strings.TrimSpace(w.Model) == "" {
		return errors.New("model: required")
	}
	if w.MaxTokens < 0 {
		return errors.New("max-tokens: must be ≥ 0")
	}
	a, err := Lookup(string(w.API))
	if err != nil {
		return err
	}
	if a.Check != nil {
		return a.Check(w)
	}
	return nil
}

// Route returns the method and path every request of the run is sent to
// (without the query), for the conditions.
func (w *Wire) Route() string {
	u := w.url()
	return http.MethodPost + " " + u.Path
}

// url returns the endpoint URL. A query on the base URL is kept (some
// deployments need one, such as an api-version); it is not part of Route
// and not recorded.
func (w *Wire) url() *url.URL {
	u := *w.Base
	u.Fragment, u.User = "", nil
	q := u.Query()
	a := w.api()
	if a.EscapedPath {
		p := a.Path(w, strings.TrimRight(u.EscapedPath(), "/"), q)
		if unescaped, err := url.PathUnescape(p); err == nil {
			u.Path, u.RawPath = unescaped, p
		}
	} else {
		u.Path, u.RawPath = a.Path(w, strings.TrimRight(u.Path, "/"), q), ""
	}
	if enc := q.Encode(); enc != u.Query().Encode() {
		u.RawQuery = enc // the API added a parameter
	}
	return &u
}

// Body returns the JSON body of a request with the prompt.
func (w *Wire) Body(prompt string) ([]byte, error) {
	a, err := Lookup(string(w.API))
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	a.Body(w, prompt, m)
	if w.Tools != nil {
		if a.Tools != nil {
			a.Tools(m, w.Tools)
		} else {
			m["tools"] = w.Tools
		}
	}
	return json.Marshal(m)
}

// NewRequest returns the HTTP request carrying body.
func (w *Wire) NewRequest(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url().String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	ua := w.UserAgent
	if ua == "" {
		ua = "ttfx-bench"
	}
	h.Set("User-Agent", ua)
	if w.Stream {
		h.Set("Accept", w.StreamType())
	} else {
		h.Set("Accept", "application/json")
	}
	a := w.api()
	if a.Headers != nil {
		a.Headers(h)
	}
	if w.Key != "" {
		a.Auth(h, w.Key)
	}
	return req, nil
}

// api returns the registered API of w, which Check found.
func (w *Wire) api() *API {
	if a := apis[w.API]; a != nil {
		return a
	}
	// A Wire is checked before use; one that was not cannot be sent.
	panic("request: no API unit " + string(w.API) + " (call Check first)")
}

// API is how the benchmark client speaks one client-facing API: the
// request's URL, body and headers. The API's unit registers it (in
// internal/provider/<name>); this package names none.
type API struct {
	// Name is the API's name, the --api value and the classifier its
	// streams are read with.
	Name protocol.API
	// Check reports the first setting the API cannot take; nil: any.
	Check func(w *Wire) error
	// Path returns the endpoint's path under the base URL's path base
	// (trimmed of its final slash), and may set query parameters.
	Path func(w *Wire, base string, q url.Values) string
	// EscapedPath is set when Path takes the base's escaped path and
	// returns an escaped one (a path segment that may hold "/", such as a
	// Bedrock model id that is an ARN).
	EscapedPath bool
	// Body fills the JSON body of a request with the prompt into m; the
	// tools are added after it.
	Body func(w *Wire, prompt string, m map[string]any)
	// Tools, when set, puts the run's tools (a JSON array) into the body
	// where the API takes them; nil: a top-level "tools".
	Tools func(m map[string]any, tools json.RawMessage)
	// Auth sets the key (never empty) and the headers the API requires.
	Auth func(h http.Header, key string)
	// Headers, when set, adds the headers every request of the API
	// carries, key or not.
	Headers func(h http.Header)
	// IncludeUsage is set when a stream of the API asks for its usage
	// (recorded in the conditions).
	IncludeUsage bool
	// StreamType and NewReader are set for an API whose streams are not
	// SSE (Bedrock's event stream): their media type and their reader,
	// which yields each frame as a piece for the classifier.
	StreamType string
	NewReader  func(r io.Reader) PieceReader
	// ErrorCode, when set, reads the provider's error type from an error
	// response's headers, for an API whose error bodies carry none
	// (Bedrock's x-amzn-ErrorType); "": none there.
	ErrorCode func(h http.Header) string
}

// maxErrorCode bounds an error code read from a header.
const maxErrorCode = 128

// HeaderErrorCode returns the error type of an error response's headers h
// for the run's API (API.ErrorCode), bounded to 128 bytes of printable
// ASCII; "" when the API reads none or h has none.
func (w *Wire) HeaderErrorCode(h http.Header) string {
	a := w.api()
	if a.ErrorCode == nil {
		return ""
	}
	code := a.ErrorCode(h)
	if len(code) > maxErrorCode {
		code = code[:maxErrorCode]
	}
	for i := 0; i < len(code); i++ {
		if code[i] < 0x21 || code[i] > 0x7e {
			return ""
		}
	}
	return code
}

// PieceReader yields a stream's pieces; *sse.Reader is the SSE one.
type PieceReader interface {
	Next() (*sse.Piece, error)
}

// StreamType is the media type of the run's streams.
func (w *Wire) StreamType() string {
	if t := w.api().StreamType; t != "" {
		return t
	}
	return "text/event-stream"
}

// StreamReader returns the reader of a stream of the run's API.
func (w *Wire) StreamReader(r io.Reader) PieceReader {
	if a := w.api(); a.NewReader != nil {
		return a.NewReader(r)
	}
	return sse.NewReader(r, 0)
}

// apis is filled at init time and read-only afterwards.
var apis = map[protocol.API]*API{}

// Register adds the benchmark client's side of an API. It panics on a
// duplicate or incomplete one: registration happens in init.
func Register(a *API) {
	if a.Name == "" || a.Path == nil || a.Body == nil || a.Auth == nil {
		panic("request: incomplete API " + string(a.Name))
	}
	if apis[a.Name] != nil {
		panic("request: API " + string(a.Name) + " registered twice")
	}
	apis[a.Name] = a
}

// APIs returns the names of the APIs the client speaks, sorted.
func APIs() []string {
	out := make([]string, 0, len(apis))
	for n := range apis {
		out = append(out, string(n))
	}
	sort.Strings(out)
	return out
}

// Lookup returns the API named name, or an error naming those there are.
func Lookup(name string) (*API, error) {
	if a := apis[protocol.API(name)]; a != nil {
		return a, nil
	}
	if len(apis) == 0 {
		return nil, fmt.Errorf("unknown api %q (no API unit is linked)", name)
	}
	return nil, fmt.Errorf("unknown api %q (want one of %s)", name, strings.Join(APIs(), ", "))
}

// SetSampling sets the sampling settings s in m under the API's names; an
// empty seed name: the API takes no seed.
func SetSampling(m map[string]any, s Sampling, temp, topP, seed string) {
	if s.Temperature != nil {
		m[temp] = *s.Temperature
	}
	if s.TopP != nil {
		m[topP] = *s.TopP
	}
	if s.Seed != nil && seed != "" {
		m[seed] = *s.Seed
	}
}
