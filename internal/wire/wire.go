// Package wire is the registry of the units that know a provider: the
// client-facing APIs a client may speak to the gateway (OpenAI chat,
// Responses, …) and the upstream provider kinds a
// channel reaches. Each unit lives in its own package under
// internal/provider and registers itself here in an init function; the
// relay, the configuration, the routing and the telemetry ask this
// registry and never name a provider (as database/sql never names a
// driver). internal/provider/all is the one list of units a program links.
//
// The registry is filled at init time and read-only afterwards, so its
// lookups take no lock.
package wire

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
)

// API is a client-facing API unit: one wire format a client speaks to the
// gateway, named as the record names it (SPEC §10 "api").
type API struct {
	// Name is the record's api ("openai.chat").
	Name string
	// Family is the protocol family a channel must speak to serve the API
	// ("openai", …): a channel's kind serves families, not
	// single APIs. It also names the error format the API's clients read.
	Family string
	// Endpoints are the gateway routes of the API.
	Endpoints []Endpoint
	// Stream is the classifier of the API's event streams; "" when its
	// responses are never streams (embeddings, models).
	Stream protocol.API
	// Response is the parser of its non-streaming responses (for usage and
	// finish reason); "" when there is none.
	Response protocol.API
	// UsageOption is set for an API whose streams report usage only when
	// asked with stream_options.include_usage: the gateway asks for it and
	// strips the usage chunk again when the client did not (SPEC §3).
	UsageOption bool
	// KeyInURL is set when the API's official SDKs may send the key as
	// ?key=; elsewhere the gateway refuses a key in the URL.
	KeyInURL bool
	// KeyHeader is how a client of the API sends its key, for error
	// messages ("Authorization: Bearer KEY").
	KeyHeader string
	// Claim scores how surely an unknown request (a path the gateway does
	// not serve, or a path several APIs share) comes from a client of this
	// API: 0 not at all, 1 by a header its SDKs send, 2 by its path. The
	// highest score picks the error format; nil claims nothing.
	Claim func(r *http.Request) int
	// Default marks the API whose format an unclaimed request gets.
	Default bool
	// ErrorBody renders an error response in the API's format.
	ErrorBody func(e protocol.ErrorResponse) []byte
	// ErrorHeaders, when set, adds the headers an error response of the
	// API carries besides its body (Bedrock's x-amzn-ErrorType).
	ErrorHeaders func(h http.Header, status int)
	// StreamError renders the in-band event that ends a stream which
	// failed after bytes were sent (see Failure).
	StreamError func(f Failure) []byte
	// Framing is how the API's streams are framed when they are not SSE
	// (AWS's binary event stream); nil: text/event-stream.
	Framing *Framing
	// GenAIOperation and GenAIProvider are the OpenTelemetry GenAI
	// gen_ai.operation.name and gen_ai.provider.name; "" for calls that are
	// no GenAI operation (listing models).
	GenAIOperation, GenAIProvider string
}

// PieceReader yields a response stream piece by piece: each complete
// event the moment its last byte arrived, calling the OnWait function
// before each read that may block. *sse.Reader is the SSE one.
type PieceReader interface {
	Next() (*sse.Piece, error)
	OnWait(func())
}

// Framing is a stream framing other than SSE.
type Framing struct {
	// ContentType is the media type of the streams
	// ("application/vnd.amazon.eventstream").
	ContentType string
	// NewReader reads a stream of that type; maxBytes bounds one event.
	NewReader func(r io.Reader, maxBytes int) PieceReader
	// Sniff reports whether b starts with a stream of this framing (for
	// ttfx inspect, which is given a file of unknown API); nil: never.
	Sniff func(b []byte) bool
	// ErrorMessage, for a kind's framing of a family (Kind.Framings),
	// reads the provider's own error response (headers and body), which
	// the client then gets in its API's format with this message; nil:
	// error responses are relayed as sent.
	ErrorMessage func(h http.Header, body []byte) string
}

// SniffFraming returns the framing a stream file b is in and the API its
// pieces are classified as: an API's own framing (API.Framing), or a
// kind's framing of a family's streams (Kind.Framings), whose pieces are
// the family's streaming API's. ok is false for a stream in none (SSE).
func SniffFraming(b []byte) (api protocol.API, f *Framing, ok bool) {
	for _, a := range apiOrder {
		if a.Framing != nil && a.Framing.Sniff != nil && a.Stream != "" && a.Framing.Sniff(b) {
			return a.Stream, a.Framing, true
		}
	}
	for _, k := range kindOrder {
		for fam, fr := range k.Framings {
			if fr.Sniff == nil || !fr.Sniff(b) {
				continue
			}
			for _, a := range apiOrder {
				if a.Family == fam && a.Stream != "" {
					return a.Stream, fr, true
				}
			}
		}
	}
	return "", nil, false
}

// Endpoint is one route of an API.
type Endpoint struct {
	// Pattern is the http.ServeMux pattern ("POST /v1/chat/completions").
	// A pattern ending in /{target} carries the model and method in its
	// last segment, which Target splits.
	Pattern string
	// HasBody is set for a route whose requests carry a JSON body.
	HasBody bool
	// Target splits the {target} path value ("m:streamGenerateContent")
	// into the model and whether the response streams; nil when the model
	// is in the body. A bad target is an *TargetError.
	Target func(target string) (model string, stream bool, err error)
	// SharedPath is set for a route several providers' APIs serve at the
	// same path (GET /v1/models): the client's headers (Claim) say whose
	// format it reads.
	SharedPath bool
	// Path is the API's own path the request is relayed as when Pattern
	// is a provider's spelling of the same operation ("/v1/chat/completions"
	// for "POST /openai/deployments/{deployment}/chat/completions"): a
	// channel of any kind of the family serves it. "": the client's path.
	Path string
	// Model names the pattern's wildcard that carries the model
	// ("deployment"). The request is for that model, and the body the
	// upstream gets names it (its "model" set or added). "": the model is
	// in the body, or in the target.
	Model string
	// DropQuery are query parameters of the client's spelling that are not
	// passed on ("api-version": a channel's kind chooses its own).
	DropQuery []string
}

// TargetError is a path target an endpoint cannot serve: Code is the HTTP
// status to answer (400 for a malformed target, 404 for an unknown method).
type TargetError struct {
	Code int
	Msg  string
}

func (e *TargetError) Error() string { return e.Msg }

// Failure is what ended a stream after bytes were sent, for StreamError.
type Failure struct {
	Code   int    // the HTTP status the failure would have had (502, 504, …)
	Status string // the record's terminal status (record.Status…)
	Msg    string // what the client reads
	Seq    int    // the data events relayed so far (a Responses sequence_number)
}

// Kind is an upstream provider kind: one way of reaching a provider from a
// channel (its `protocol` key in the configuration).
type Kind struct {
	// Name is the channel's kind ("openai").
	Name string
	// Families are the API families its channels serve.
	Families []string
	// Authorize sets the channel's static key and the headers the
	// provider requires on an upstream request. A channel whose Upstream
	// has Credentials is authorized by them instead; Authorize, when not
	// nil, still runs first (with the static key, "" when none) for the
	// other headers. It may be nil only for a kind with Open.
	Authorize func(h http.Header, key string)
	// ForwardHeaders are the client headers the provider reads, which the
	// gateway passes on (never the client's credentials).
	ForwardHeaders []string
	// ZeroConfig marks a kind the zero-config gateway gives a simulator
	// channel (one per API family: the provider's own kind, whose Name is
	// the family; the channel serves that family only).
	ZeroConfig bool
	// URL builds the upstream URL of a request; nil joins the channel's
	// base and the client's path and query (JoinURL).
	URL func(t Target) *url.URL

	// Settings are the channel keys the kind reads besides the common
	// ones (Setting). The configuration refuses other keys.
	Settings []Setting
	// DefaultBaseURL gives a channel that names no base_url one from its
	// region key and its settings (Vertex's regional endpoint from its
	// location, Bedrock's from the region); "" or nil: the kind needs
	// base_url.
	DefaultBaseURL func(region string, settings map[string]string) string
	// Open builds a channel's Upstream from its configuration: its
	// settings checked, its credentials set up (token sources warm up
	// here, off the request path). nil: every channel of the kind uses
	// URL and Authorize with its static key. It runs at start and at every
	// reload; an error refuses the configuration.
	Open func(c ChannelConfig) (*Upstream, error)
	// RateLimits reads the provider's rate-limit headers from an answer
	// of any status (ratelimit.go); nil: the provider sends none, and
	// only a 429's Retry-After is read (ReadRateLimits).
	RateLimits func(h http.Header, now time.Time) RateLimits
	// Framings, keyed by API family, are the framings the provider sends
	// a family's streams in when they are not the family's own (a family's
	// SSE events inside a cloud's binary event-stream frames). The reader yields the family's own pieces
	// (SSE events), which the client gets as text/event-stream.
	Framings map[string]*Framing
	// Example is what a channel of the kind looks like, for synthetic
	// records (internal/seed) and documentation; zero: none.
	Example Example
	// GenAIProvider is OpenTelemetry's gen_ai.provider.name of the
	// kind's channels when it is not the client API's (a cloud serving
	// another provider's API: "aws.bedrock" for Anthropic clients on
	// Bedrock); "": the API's (API.GenAIProvider).
	GenAIProvider string
}

// Example shows a channel of a kind: the host of the provider's public
// endpoint and, by API family, a few model names it serves (the first the
// busiest, as a fleet's small fast model is).
type Example struct {
	Host   string
	Models map[string][]string
}

// Setting returns the setting of k named name, or nil.
func (k *Kind) Setting(name string) *Setting {
	for i := range k.Settings {
		if k.Settings[i].Name == name {
			return &k.Settings[i]
		}
	}
	return nil
}

// Target is what a kind builds an upstream URL from.
type Target struct {
	Base   *url.URL // the channel's base_url (not to be modified)
	Path   string   // the client's path ("/v1/chat/completions")
	Query  string   // the client's query, any key removed
	Model  string   // the model the request is for (in a deployment's name for some kinds)
	Stream bool     // the client asked for a stream (some kinds name it in the URL)
	Family string   // the client API's family ("openai"): what the body speaks
}

var (
	apis       = map[string]*API{}
	apiOrder   []*API
	byPattern  = map[string]*API{}
	kinds      = map[string]*Kind{}
	kindOrder  []*Kind
	defaultAPI *API
)

// RegisterAPI adds a client-facing API unit. It panics on a duplicate or
// incomplete unit: registration happens in init, where that is a bug.
func RegisterAPI(a *API) {
	if a.Name == "" || a.Family == "" || a.ErrorBody == nil || a.StreamError == nil {
		panic("wire: incomplete API unit " + a.Name)
	}
	if apis[a.Name] != nil {
		panic("wire: API " + a.Name + " registered twice")
	}
	for _, ep := range a.Endpoints {
		if byPattern[ep.Pattern] != nil {
			panic("wire: endpoint " + ep.Pattern + " registered twice")
		}
		byPattern[ep.Pattern] = a
	}
	if a.Default {
		if defaultAPI != nil {
			panic("wire: two default APIs")
		}
		defaultAPI = a
	}
	apis[a.Name] = a
	apiOrder = append(apiOrder, a)
	sort.SliceStable(apiOrder, func(i, j int) bool { return apiOrder[i].Name < apiOrder[j].Name })
}

// AddEndpoints adds routes to the API named api, registered before: a
// provider's client-facing spellings of its operations (Endpoint.Path). It
// panics on an unknown API or a duplicate pattern.
func AddEndpoints(api string, eps ...Endpoint) {
	a := apis[api]
	if a == nil {
		panic("wire: endpoints for API " + api + ", which is not registered")
	}
	for _, ep := range eps {
		if byPattern[ep.Pattern] != nil {
			panic("wire: endpoint " + ep.Pattern + " registered twice")
		}
		if ep.Model != "" && !strings.Contains(ep.Pattern, "{"+ep.Model+"}") {
			panic("wire: endpoint " + ep.Pattern + " has no wildcard {" + ep.Model + "}")
		}
		byPattern[ep.Pattern] = a
		a.Endpoints = append(a.Endpoints, ep)
	}
}

// RegisterKind adds an upstream provider kind.
func RegisterKind(k *Kind) {
	if k.Name == "" || len(k.Families) == 0 || k.Authorize == nil && k.Open == nil {
		panic("wire: incomplete provider kind " + k.Name)
	}
	if kinds[k.Name] != nil {
		panic("wire: provider kind " + k.Name + " registered twice")
	}
	kinds[k.Name] = k
	kindOrder = append(kindOrder, k)
	sort.SliceStable(kindOrder, func(i, j int) bool { return kindOrder[i].Name < kindOrder[j].Name })
}

// APIs returns every registered API, by name.
func APIs() []*API { return apiOrder }

// LookupAPI returns the API named name, or nil.
func LookupAPI(name string) *API { return apis[name] }

// Kinds returns every registered provider kind, by name.
func Kinds() []*Kind { return kindOrder }

// LookupKind returns the provider kind named name, or nil.
func LookupKind(name string) *Kind { return kinds[name] }

// KindNames returns the registered kinds' names, by name.
func KindNames() []string {
	out := make([]string, len(kindOrder))
	for i, k := range kindOrder {
		out[i] = k.Name
	}
	return out
}

// ParseKind returns the kind named s, or an error naming the kinds there are.
func ParseKind(s string) (*Kind, error) {
	if k := kinds[s]; k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("%q is not a provider kind (want %s)", s, KindList())
}

// KindList names the registered kinds for a message: "a, b or c".
func KindList() string { return orList(KindNames()) }

func orList(names []string) string {
	switch len(names) {
	case 0:
		return "none: no provider unit is linked"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Serves reports whether a channel of kind serves clients of family. A kind
// no unit registered serves the family of its own name, so that code which
// links no unit (a routing test) still routes by name.
func Serves(kind, family string) bool {
	if k := kinds[kind]; k != nil {
		return slices.Contains(k.Families, family)
	}
	return kind == family
}

// Guess returns the API whose error format an unknown request expects: the
// one that claims it most surely, or the default API.
func Guess(r *http.Request) *API {
	best, score := defaultAPI, 0
	for _, a := range apiOrder {
		if a.Claim == nil {
			continue
		}
		if s := a.Claim(r); s > score {
			best, score = a, s
		}
	}
	return best
}

// Default returns the API whose format an unclaimed request gets; nil when
// no unit is linked.
func Default() *API { return defaultAPI }

// Prefixes returns the first path segments of every endpoint ("/v1/",
// "/v1beta/"), under which the gateway answers unknown paths in a
// provider's format.
func Prefixes() []string {
	var out []string
	for _, a := range apiOrder {
		for _, ep := range a.Endpoints {
			_, p, _ := strings.Cut(ep.Pattern, " ")
			if i := strings.IndexByte(p[1:], '/'); i >= 0 {
				p = p[:i+2]
			}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}

// JoinURL appends the client's path to a channel's base URL. A base that
// already ends in the path's version segment ("https://api.openai.com/v1",
// as SDKs are configured) does not get it twice. The base's own query (an
// api-version=…) comes before the client's.
func JoinURL(base *url.URL, path, query string) *url.URL {
	u := new(url.URL)
	*u = *base
	u.Path = JoinPath(u.Path, path)
	u.RawPath = ""
	switch {
	case u.RawQuery == "":
		u.RawQuery = query
	case query != "":
		u.RawQuery += "&" + query
	}
	return u
}

// JoinPath appends path to a base path, dropping a version segment
// ("/v1", "/v1beta") the base already ends in.
func JoinPath(base, path string) string {
	base = strings.TrimSuffix(base, "/")
	if i := strings.LastIndexByte(base, '/'); i >= 0 {
		if v := base[i:]; isVersion(v) && strings.HasPrefix(path, v+"/") {
			return base + strings.TrimPrefix(path, v)
		}
	}
	return base + path
}

// isVersion reports whether seg is an API version segment: "/v" and a
// digit, then letters or digits ("/v1", "/v1beta", "/v1alpha").
func isVersion(seg string) bool {
	if len(seg) < 3 || seg[:2] != "/v" || seg[2] < '0' || seg[2] > '9' {
		return false
	}
	for _, c := range seg[3:] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// MaxEcho bounds the client-supplied text an error message quotes.
const MaxEcho = 64

// Echo returns client-supplied text fit to quote in an error message: at
// most MaxEcho bytes, cut on a rune boundary, Go-quoted so control
// characters are escaped.
func Echo(s string) string {
	if len(s) > MaxEcho {
		cut := MaxEcho
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
