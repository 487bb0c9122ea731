package protocol

import (
	"fmt"
	"sort"
	"strings"
)

// API names a client-facing API's wire format, as the record names it
// (SPEC §10 "api"). Its classifier is registered by the API's unit
// (internal/provider/<name>): this package names none.
type API string

// Classifier is one API's wire rules, registered with Register by the
// unit that knows the API. The hooks write what an event carries into the
// per-event Event and the per-stream Content through the exported helpers
// of this package (Str, AddContent, RawStr, …), which walk the JSON once
// and do not allocate: a hook must keep that (BenchmarkClassify,
// TestHotPathAllocations).
type Classifier struct {
	// Event classifies one dispatched event's data (trimmed, not empty,
	// not [DONE]); typ is its SSE event type. It returns false when the
	// data is not well-formed JSON: nothing of the event counts then.
	Event func(c *Content, e *Event, typ, data []byte) bool
	// Response reads a complete non-streaming response body (or the API's
	// error body) for ParseResponse; it returns false when the body is not
	// well-formed JSON and sets Unknown in e.Kinds for one that is not of
	// the API. Nil: the API has no non-streaming form to read.
	Response func(c *Content, e *Event, body []byte) bool
	// PerChoice is set for an API whose finish reason ends only its
	// choice (n > 1): its stream is done when every choice it showed
	// finished, or at [DONE].
	PerChoice bool
	// SplitUsage is set for an API that splits one usage report over
	// several events (input at the start, output at the end): the counts
	// are merged one by one. Otherwise a report replaces earlier ones whole
	// (§2: the last complete report wins).
	SplitUsage bool
	// Detect scores how surely an event of this shape comes from a stream
	// of this API, for Detect: 0 not at all; the highest score wins, so
	// the units agree on a scale (see DetectData). Nil: never guessed.
	Detect func(s *Shape) int
	// Exception, for an API whose framing says a message is a failure
	// apart from its payload (an AWS event-stream message whose
	// :message-type is exception), reads a piece's raw bytes and returns
	// the error code and true for such a message, which then counts as
	// a terminal error event whatever its payload. Nil: errors are in
	// the events' data, as Event reads them.
	Exception func(raw []byte) (code []byte, ok bool)
}

// classifiers is filled at init time and read-only afterwards.
var classifiers = map[API]*Classifier{}

// Register adds the classifier of api. It panics on a duplicate or an
// incomplete classifier: registration happens in init, where that is a
// bug.
func Register(api API, c *Classifier) {
	if api == "" || c == nil || c.Event == nil {
		panic("protocol: incomplete classifier " + string(api))
	}
	if classifiers[api] != nil {
		panic("protocol: classifier " + string(api) + " registered twice")
	}
	classifiers[api] = c
}

// Lookup returns the classifier registered for api, or nil: for a unit
// whose streams carry another API's events inside (Bedrock's InvokeModel
// chunks hold Anthropic's), called after that API's unit registered.
func Lookup(api API) *Classifier { return classifiers[api] }

// APIs returns the APIs a classifier is registered for, by name.
func APIs() []API {
	out := make([]API, 0, len(classifiers))
	for a := range classifiers {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ParseAPI returns the API named s, one a classifier is registered for.
func ParseAPI(s string) (API, error) {
	if classifiers[API(s)] != nil {
		return API(s), nil
	}
	apis := APIs()
	names := make([]string, len(apis))
	for i, a := range apis {
		names[i] = string(a)
	}
	if len(names) == 0 {
		return "", fmt.Errorf("unknown api %q (no API unit is linked)", s)
	}
	return "", fmt.Errorf("unknown api %q (want one of %s)", s, strings.Join(names, ", "))
}

// perChoice reports whether the stream's finish reasons end only their
// choice.
func (s *Stream) perChoice() bool { return s.cl != nil && s.cl.PerChoice }
