package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/wire"
)

// API names the client-facing API a request came to, as wire and the
// record name it ("openai.chat"; SPEC.md §10, `ttfx inspect --api`).
type API string

// The endpoints the simulator serves besides the registered APIs'.
const (
	APIModels API = "models"  // the model-listing paths of the units (Unit.ModelPaths)
	APIHealth API = "healthz" // GET /healthz
)

// created is the fixed creation time written into OpenAI bodies
// (2026-01-01T00:00:00Z): a wall-clock timestamp would make the same
// profile's bodies differ from one request to the next.
const created int64 = 1767225600

func newResponse(model, profile string, p Profile, c *content, pl plan, input int, includeUsage bool) *Response {
	r := &Response{Model: model, ID: makeIDs(profile, p.Seed), Input: input, IncludeUsage: includeUsage,
		VisibleText: c.visibleText, ReasoningText: c.reasoningText, ToolName: c.toolName, ToolArgs: c.toolArgs,
		VisibleTokens: c.visibleTokens, ReasoningTokens: c.reasoningTokens, ToolTokens: c.toolTokens,
		commentPings: p.HeartbeatComments, End: pl.end}
	seen := map[StepKind]bool{}
	for _, st := range pl.steps {
		switch st.kind {
		case StepReasoning, StepTool, StepText:
			if r.FirstByte == 0 {
				r.FirstByte = st.at
			}
			if !seen[st.kind] {
				seen[st.kind] = true
				r.Order = append(r.Order, st.kind)
			}
		}
	}
	r.HasTool = seen[StepTool]
	return r
}

// marshal encodes v as JSON the way the providers write it: compact, and
// without Go's HTML escaping of <, > and & (no provider escapes them).
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every value marshalled here is a struct of strings, numbers and
		// slices of them: failing is a programming error.
		panic("sim: marshal: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// appendData appends one `data:` event (OpenAI chat and completions style).
func appendData(dst []byte, v any) []byte { return sse.AppendEvent(dst, "", marshal(v)) }

// appendTyped appends an event with an `event:` line.
func appendTyped(dst []byte, typ string, v any) []byte { return sse.AppendEvent(dst, typ, marshal(v)) }

// appendCRLF appends one `data:` event framed with CRLF line ends, as
// some providers' servers send them (see the fixtures).
func appendCRLF(dst []byte, v any) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, marshal(v)...)
	return append(dst, "\r\n\r\n"...)
}

// null is a JSON null for fields that providers send as null rather than
// leave out.
var null = json.RawMessage("null")

func ptr[T any](v T) *T { return &v }

// Error is an error response, written in the format of the API it is
// answered on.
type Error struct {
	status int
	msg    string
	param  string // OpenAI's "param", when one field is at fault
	code   string // OpenAI's "code"; empty: derived from status
	allow  string // the Allow header of a 405
}

func (e *Error) Error() string { return strconv.Itoa(e.status) + " " + e.msg }

func errorf(status int, msg string) *Error { return &Error{status: status, msg: msg} }

// errorBody returns the JSON error body of the API a (the default API's
// when a is nil): the providers' documented shapes, shared with the
// gateway (wire.API.ErrorBody).
func errorBody(a *wire.API, e *Error) []byte {
	if a == nil {
		a = wire.Default()
	}
	return a.ErrorBody(protocol.ErrorResponse{Status: e.status, Message: e.msg, Param: e.param, Code: e.code})
}

// writeError sends e as a complete response in the format of the API a
// (the default API's when a is nil), written by its unit when the unit
// writes its own errors.
func writeError(w http.ResponseWriter, a *wire.API, e *Error) {
	if u := unitOf(a); u != nil && u.WriteError != nil {
		writeUnitError(w, u, e)
		return
	}
	h := w.Header()
	if e.allow != "" {
		h.Set("Allow", e.allow)
	}
	h.Set("Content-Type", "application/json")
	if (e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable || e.status == 529) && h.Get("Retry-After") == "" {
		// A profile's rate limit (ratelimit.go) has set its own.
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(e.status)
	w.Write(errorBody(a, e))
}

// writeUnitError sends e in the format of u's API: the unit's own
// WriteError, else its wire API's body.
func writeUnitError(w http.ResponseWriter, u *Unit, e *Error) {
	if u == nil || u.WriteError == nil {
		var a *wire.API
		if u != nil {
			a = wire.LookupAPI(string(u.API))
		}
		writeError(w, a, e)
		return
	}
	if e.allow != "" {
		w.Header().Set("Allow", e.allow)
	}
	u.WriteError(w, e)
}

// unitOf is the unit of the API a; nil when none is registered.
func unitOf(a *wire.API) *Unit {
	if a == nil {
		return nil
	}
	return units[API(a.Name)]
}

// streamErrorMessage is the message of the error_event fault.
const streamErrorMessage = "The simulated server had an error while processing your request (fault error_event_after)."

// joinText concatenates the texts of pieces.
func joinText(pieces []string) string { return strings.Join(pieces, "") }

// A template is an event's JSON with one string left open: the bytes
// around it are what marshal writes for the event, so filling it gives the
// same bytes as marshalling the event with that string. Text deltas, the
// bulk of every stream, are written through templates: BenchmarkFrame
// measured 4.4 µs and 5 allocations per OpenAI chat delta through marshal,
// 23 ns and none through a template; at 1,000 streams marshal's garbage
// was a third of the process's, and every GC cycle also scans the
// tokenizer's large vocabulary.
type template struct{ pre, post []byte }

// hole is the placeholder a template is cut at; no generated text holds NUL.
const hole = "\x00ttfx-template-hole\x00"

func makeTemplate(v any) template {
	b := marshal(v)
	h := marshal(hole)
	i := bytes.Index(b, h)
	if i < 0 {
		panic("sim: template without its hole")
	}
	return template{pre: b[:i:i], post: b[i+len(h):]}
}

// appendData appends the template filled with s as a `data:` event, with
// an `event:` line when typ is set.
func (t template) appendEvent(dst []byte, typ, s string) []byte {
	if typ != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	dst = append(dst, "data: "...)
	dst = append(dst, t.pre...)
	dst = appendJSONString(dst, s)
	dst = append(dst, t.post...)
	return append(dst, '\n', '\n')
}

// appendJSONString appends s as a JSON string exactly as encoding/json
// writes it with SetEscapeHTML(false): \" \\ \n \r \t \b \f, \u00XX for
// other control bytes, \ufffd for invalid UTF-8, and \u2028 \u2029 escaped.
func appendJSONString(dst []byte, s string) []byte {
	const hexd = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexd[c>>4], hexd[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexd[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendComment(dst []byte) []byte { return sse.AppendComment(dst, "ping") }
