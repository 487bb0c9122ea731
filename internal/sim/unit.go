package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/wire"
)

// Unit is the simulator's side of one client-facing API (a wire.API of
// the same name): how its request bodies are read and how the steps of a
// plan are written in its wire format. The API's package registers it
// (internal/provider/<name>/<name>sim); the simulator serves the API's
// endpoints (wire.API.Endpoints) with it and writes its errors with the
// API's own ErrorBody, so that this package names no provider.
type Unit struct {
	// API is the wire API's name ("openai.chat"), the Info.API of its
	// requests.
	API API
	// Read checks the API's own members of a request body and fills what
	// they say into req; it returns the members whose text is the prompt
	// (counted for the usage). The model and stream flag are read before
	// it, from the body or the path.
	Read func(b Body, req *Request) (prompt []string, err *Error)
	// Check, when set, checks a read request against the rest of the HTTP
	// request (a query parameter the API needs for streaming).
	Check func(r *http.Request, req *Request) *Error
	// NewEncoder returns the writer of one response. Nil for an API that
	// answers with vectors rather than generated text (embeddings).
	NewEncoder func(r *Response) Encoder
	// Missing words the message about a missing required member as the
	// provider does; nil: OpenAI's words.
	Missing func(name string) string
	// ModelPaths are the model-listing paths the API's clients call
	// ("/v1/models", and "/v1/models/{target}" for one model), served with
	// ModelList and ModelObject in the format of the API that claims the
	// request (wire.Guess).
	ModelPaths []string
	// ModelList and ModelObject write a model list and one model in the
	// API's form; nil: the default API's form.
	ModelList   func(names []string) []byte
	ModelObject func(name string) []byte
	// WriteError, when set, writes an error response in the API's format,
	// headers included; nil: the JSON of the wire API's ErrorBody (the
	// default API's for a unit with no wire API).
	WriteError func(w http.ResponseWriter, e *Error)
	// RateHeaders, when set, sets the rate-limit headers the API's
	// provider sends on every answer of a profile with a RateLimit; nil:
	// the x-ratelimit-limit-*, -remaining-* and -reset-* headers most
	// OpenAI-compatible services send, and Retry-After-Ms on a 429.
	RateHeaders func(h http.Header, rs RateState)
}

// Route is one path of a provider kind's own URL form that the simulator
// serves (a deployment URL), for a client-facing API.
type Route struct {
	// Path is the http.ServeMux path, without a method (the method is
	// checked in the API's error format).
	Path string
	// API is the client-facing API whose body and response the route
	// carries (Accept may choose another).
	API API
	// Model names the path wildcard that names the model (a deployment);
	// empty: the model is in the body.
	Model string
	// Target is set when the path names the model and whether the answer
	// streams (Stream): the body names neither.
	Target bool
	Stream bool
	// Accept, when set, authenticates the request and checks its URL and
	// body as the kind's service does, and may pick the API, the model and
	// streaming from the path. A non-nil error is the answer, in the
	// format of the Call's API. Without Accept, the API key is checked as
	// on the APIs' own routes.
	Accept func(c *Call) *Error
	// Wrap, when set, wraps the response writer of an accepted request:
	// what the kind adds to or changes in the API's bytes (a content
	// filter's chunks, its own error bodies). The simulator writes each
	// event and each error body in one Write.
	Wrap func(w http.ResponseWriter, api API) http.ResponseWriter
	// RateHeaders, when set, replaces the API's rate-limit headers
	// (Unit.RateHeaders) on this route.
	RateHeaders func(h http.Header, rs RateState)
	// Record is set when a request Accept refuses is reported to
	// Options.OnRequest too.
	Record bool
}

// Endpoint is a path of a provider kind that serves no API (an identity
// provider's token endpoint).
type Endpoint struct {
	Path  string
	Serve func(s *Server, w http.ResponseWriter, r *http.Request)
}

// Kind is the simulator's side of an upstream provider kind whose URLs,
// credentials or errors differ from those of the APIs it serves.
type Kind struct {
	Name      string
	Routes    []Route
	Endpoints []Endpoint
}

// Call is a request on a kind's route, for its Accept.
type Call struct {
	R *http.Request
	// API, Model, Target and Stream are the route's, and what Accept says
	// instead.
	API    API
	Model  string
	Target bool
	Stream bool

	s    *Server
	w    http.ResponseWriter
	body []byte
	read bool
}

// Options are the simulator's options.
func (c *Call) Options() *Options { return &c.s.opts }

// Now is the simulator's clock.
func (c *Call) Now() time.Time { return c.s.now() }

// Body reads the request body (at most Options.MaxBodyBytes) for Accept;
// the simulator reads it again from the start when it serves the request.
func (c *Call) Body() ([]byte, *Error) {
	if c.read {
		return c.body, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.w, c.R.Body, c.s.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errorf(http.StatusRequestEntityTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", mbe.Limit))
		}
		return nil, errorf(http.StatusBadRequest, "The request body could not be read.")
	}
	c.body, c.read = b, true
	return b, nil
}

// Bearer checks the request's bearer token against the tokens the
// simulator's token endpoints issued (identity.go): "" when it is valid,
// else "missing", "expired" or "invalid". With no Options.Identity, any
// bearer token passes (as any key does without Options.APIKey).
func (c *Call) Bearer() string { return c.s.bearer(c.R) }

// RateState is a profile's rate limit as one answer reports it.
type RateState struct {
	Now    time.Time
	Limits []RateLimitState // the limited dimensions: "requests", "tokens"
	// Wait is how long until the request would fit; 0 when it was taken.
	Wait time.Duration
}

// RateLimitState is one dimension of a rate limit.
type RateLimitState struct {
	Name      string // "requests" or "tokens"
	Limit     int64
	Remaining int64
	Reset     time.Duration // until the bucket is whole again
}

// units and kinds are filled at init time and read-only afterwards.
var (
	units = map[API]*Unit{}
	kinds []*Kind
)

// Register adds the simulator side of a client-facing API. It panics on a
// duplicate or incomplete unit: registration happens in init.
func Register(u *Unit) {
	if u.API == "" || u.Read == nil {
		panic("sim: incomplete unit " + string(u.API))
	}
	if units[u.API] != nil {
		panic("sim: unit " + string(u.API) + " registered twice")
	}
	units[u.API] = u
}

// RegisterKind adds the simulator side of a provider kind.
func RegisterKind(k *Kind) {
	for _, o := range kinds {
		if o.Name == k.Name {
			panic("sim: kind " + k.Name + " registered twice")
		}
	}
	kinds = append(kinds, k)
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].Name < kinds[j].Name })
}

// Units returns the APIs a simulator side is registered for, by name.
func Units() []API {
	out := make([]API, 0, len(units))
	for a := range units {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Encoder writes the steps of a plan in one API's wire format.
type Encoder interface {
	// Frame appends the bytes of st to dst; nothing when the API has no
	// counterpart of the step.
	Frame(dst []byte, st Step) []byte
	// Body returns the complete non-streaming response.
	Body() []byte
}

// FramedEncoder is an Encoder whose streams are not server-sent events
// (an event-stream framing): their media type and how many events a
// write holds.
type FramedEncoder interface {
	Encoder
	ContentType() string
	Events(b []byte) int
}

// Step is one moment of a plan, as an Encoder writes it.
type Step struct {
	At     time.Duration // due time, from the request's receipt
	Kind   StepKind
	Text   string // the delta's text (reasoning, tool arguments, visible text)
	Tokens int    // tokens the delta carries
	Last   bool   // the last delta of its part: the encoder closes the part after it
}

// Request is what the simulator read from a request body.
type Request struct {
	Model        string
	Stream       bool
	IncludeUsage bool // the stream reports usage at its end (OpenAI's stream_options.include_usage)
	// EmbedInputs, Dimensions and Base64 are an embeddings request's
	// inputs (one text per vector), vector length (0: default) and
	// encoding.
	EmbedInputs []string
	Dimensions  int
	Base64      bool

	prompt []string // text strings of the prompt, for usage
}

// Body is a request body's top-level members, for a Unit's Read.
type Body struct {
	fields map[string]json.RawMessage
	u      *Unit
}

// Raw returns the member name unless it is absent or null.
func (b Body) Raw(name string) (json.RawMessage, bool) {
	raw, ok := b.fields[name]
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

// Has reports whether the member name is there, even as null.
func (b Body) Has(name string) bool {
	_, ok := b.fields[name]
	return ok
}

// Str returns the string member name; "" when absent or null.
func (b Body) Str(name string) (string, *Error) {
	raw, ok := b.Raw(name)
	if !ok {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", FieldError(name, "must be a string")
	}
	return s, nil
}

// Bool returns the boolean member name; false when absent or null.
func (b Body) Bool(name string) (bool, *Error) {
	raw, ok := b.Raw(name)
	if !ok {
		return false, nil
	}
	var v bool
	if json.Unmarshal(raw, &v) != nil {
		return false, FieldError(name, "must be a boolean")
	}
	return v, nil
}

// Required is the error of a missing or null member name; nil when it is
// there.
func (b Body) Required(name string) *Error {
	if _, ok := b.Raw(name); !ok {
		return b.Missing(name)
	}
	return nil
}

// Missing is the 400 about the missing member name, in the provider's words.
func (b Body) Missing(name string) *Error {
	return &Error{status: http.StatusBadRequest, msg: b.u.missing(name), param: name, code: "missing_required_parameter"}
}

// Array checks that the member name is a JSON array, non-empty when
// nonEmpty.
func (b Body) Array(name string, nonEmpty bool) *Error { return arrayField(b.fields, name, nonEmpty) }

func (u *Unit) missing(name string) string {
	if u != nil && u.Missing != nil {
		return u.Missing(name)
	}
	return "Missing required parameter: '" + name + "'."
}

// Errorf is an error response of status with the message msg, in the
// format of the API it is answered on.
func Errorf(status int, msg string) *Error { return errorf(status, msg) }

// CodedError is Errorf with the error's code, for a format that has one.
func CodedError(status int, code, msg string) *Error {
	return &Error{status: status, msg: msg, code: code}
}

// MethodNotAllowed is the 405 that names the allowed method.
func MethodNotAllowed(allow string) *Error {
	return &Error{status: http.StatusMethodNotAllowed, msg: "Method not allowed; use " + allow + ".", allow: allow}
}

// JSONError is the 400 about a body that is not the JSON it must be.
func JSONError(err error) *Error { return jsonError(err) }

// Status, Message and Code are the error's HTTP status, message and code
// (empty: none given).
func (e *Error) Status() int     { return e.status }
func (e *Error) Message() string { return e.msg }
func (e *Error) Code() string    { return e.code }

// Clip bounds a client's string echoed in an error.
func Clip(s string) string { return clip(s) }

// FieldError is the 400 about an invalid member name.
func FieldError(name, what string) *Error { return fieldError(name, what) }

// Response is what one response's Encoder writes: the profile's content,
// the request's model and options, and the identifiers of its bodies.
type Response struct {
	Model        string
	ID           IDs
	Input        int        // prompt tokens
	IncludeUsage bool       // the request asked for usage at the stream's end
	Order        []StepKind // the content parts in the order the stream sends them
	HasTool      bool

	// The whole texts of the content, and their token counts (reasoning
	// tokens count hidden reasoning too).
	VisibleText, ReasoningText                 string
	ToolName, ToolArgs                         string // the tool call's name and JSON arguments
	VisibleTokens, ReasoningTokens, ToolTokens int
	// FirstByte and End are when the first content and the last step are
	// due (a provider that reports its own latency metrics).
	FirstByte, End time.Duration

	// commentPings: keep-alives go out as ": ping" comments
	// (Profile.HeartbeatComments).
	commentPings bool
}

// OutputTokens is what a usage report counts as output: visible,
// reasoning and tool-call tokens.
func (r *Response) OutputTokens() int { return r.VisibleTokens + r.ReasoningTokens + r.ToolTokens }

// KeepAlive appends the keep-alive of the APIs that document none: nothing,
// unless the profile asks for the ": ping" comment that OpenAI-compatible
// routers (OpenRouter's ": OPENROUTER PROCESSING") send.
func (r *Response) KeepAlive(dst []byte) []byte {
	if !r.commentPings {
		return dst
	}
	return appendComment(dst)
}

// IDs are the identifiers of one profile's responses, derived from its
// name and seed so that bodies are the same bytes every time; each API's
// encoder takes the ones of its shape.
type IDs struct {
	Chat          string // "chatcmpl-" and 29 letters or digits
	Completion    string // "cmpl-" and 29
	Response      string // "resp_" and 50 hex digits
	Message       string // "msg_" and 50 hex digits
	Msg01         string // "msg_01" and 22 letters or digits
	Call          string // "call_" and 24
	ToolUse       string // "toolu_01" and 22
	ReasoningItem string // "rs_" and 50 hex digits
	FunctionItem  string // "fc_" and 50 hex digits
	Short         string // 22 letters or digits
	Fingerprint   string // "fp_" and 10 hex digits
	Signature     string // "Er", 170 base64 characters and "=="
}

// Exported helpers for the encoders.

// Marshal encodes v as JSON the way the providers write it: compact, and
// without Go's HTML escaping of <, > and &.
func Marshal(v any) []byte { return marshal(v) }

// AppendData appends one `data:` event of v.
func AppendData(dst []byte, v any) []byte { return appendData(dst, v) }

// AppendTyped appends an event of v with an `event:` line.
func AppendTyped(dst []byte, typ string, v any) []byte { return appendTyped(dst, typ, v) }

// AppendCRLF appends one `data:` event of v framed with CRLF line ends.
func AppendCRLF(dst []byte, v any) []byte { return appendCRLF(dst, v) }

// AppendCRLFRaw is AppendCRLF for JSON already encoded.
func AppendCRLFRaw(dst, data []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, "\r\n\r\n"...)
}

// Null is a JSON null for members providers send as null rather than
// leave out.
var Null = null

// Ptr returns a pointer to v.
func Ptr[T any](v T) *T { return &v }

// Created is the fixed creation time written into bodies that carry one
// (2026-01-01T00:00:00Z).
const Created = created

// StreamErrorMessage is the message of the error_event fault.
const StreamErrorMessage = streamErrorMessage

// Hole is the placeholder a Template is cut at.
const Hole = hole

// Template is an event's JSON with one string left open (see template).
type Template struct{ t template }

// MakeTemplate cuts the JSON of v, which holds the string Hole once.
func MakeTemplate(v any) Template { return Template{makeTemplate(v)} }

// Empty reports whether the template was not made yet.
func (t Template) Empty() bool { return t.t.pre == nil }

// AppendEvent appends the template filled with s as a `data:` event, with
// an `event:` line when typ is set.
func (t Template) AppendEvent(dst []byte, typ, s string) []byte { return t.t.appendEvent(dst, typ, s) }

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// Served is what one registered unit or kind serves, for help texts.
type Served struct {
	Name  string   // the API's name, or "kind " and the kind's name
	Paths []string // its paths, as the mux takes them
}

// ServedPaths lists the paths the simulator serves for each registered
// API (its wire endpoints and model paths) and each kind (its routes and
// endpoints), APIs first, by name.
func ServedPaths() []Served {
	var out []Served
	for _, name := range Units() {
		u := units[name]
		var paths []string
		if a := wire.LookupAPI(string(name)); a != nil {
			for _, ep := range a.Endpoints {
				if !ep.SharedPath {
					_, p, _ := strings.Cut(ep.Pattern, " ")
					paths = append(paths, p)
				}
			}
		}
		paths = append(paths, u.ModelPaths...)
		if len(paths) > 0 {
			var uniq []string
			for _, p := range paths {
				if !slices.Contains(uniq, p) {
					uniq = append(uniq, p)
				}
			}
			out = append(out, Served{string(name), uniq})
		}
	}
	for _, k := range kinds {
		var paths []string
		for _, rt := range k.Routes {
			paths = append(paths, rt.Path)
		}
		for _, ep := range k.Endpoints {
			paths = append(paths, ep.Path)
		}
		out = append(out, Served{"kind " + k.Name, paths})
	}
	return out
}
