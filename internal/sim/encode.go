package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
)

// API names the endpoint family a request came to. The four streaming
// protocols use the names of SPEC.md §10 (`ttfx inspect --api`).
type API string

// The endpoints the simulator serves.
const (
	APIChat        API = "openai.chat"        // POST /v1/chat/completions
	APICompletions API = "openai.completions" // POST /v1/completions (legacy text completions)
	APIResponses   API = "openai.responses"   // POST /v1/responses
	APIEmbeddings  API = "openai.embeddings"  // POST /v1/embeddings
	APIModels      API = "models"             // GET /v1/models, /v1beta/models
	APIAnthropic   API = "anthropic"          // POST /v1/messages
	APIGemini      API = "gemini"             // POST /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse
	APIHealth      API = "healthz"            // GET /healthz
)

// created is the fixed creation time written into OpenAI bodies
// (2026-01-01T00:00:00Z): a wall-clock timestamp would make the same
// profile's bodies differ from one request to the next.
const created int64 = 1767225600

// response is what one request's encoder needs: shared by the protocols.
type response struct {
	model        string
	id           ids
	c            *content
	input        int        // prompt tokens
	includeUsage bool       // OpenAI stream_options.include_usage
	order        []stepKind // the content parts in the order the stream sends them
	hasTool      bool
	// commentPings: keep-alives go out on the OpenAI APIs as ": ping"
	// comments (Profile.HeartbeatComments).
	commentPings bool
	// firstByte and end are when the first content and the last step are
	// due (Bedrock reports them as its own metrics).
	firstByte, end time.Duration
}

func newResponse(model, profile string, p Profile, c *content, pl plan, input int, includeUsage bool) *response {
	r := &response{model: model, id: makeIDs(profile, p.Seed), c: c, input: input, includeUsage: includeUsage, commentPings: p.HeartbeatComments, end: pl.end}
	seen := map[stepKind]bool{}
	for _, st := range pl.steps {
		switch st.kind {
		case stepReasoning, stepTool, stepText:
			if r.firstByte == 0 {
				r.firstByte = st.at
			}
			if !seen[st.kind] {
				seen[st.kind] = true
				r.order = append(r.order, st.kind)
			}
		}
	}
	r.hasTool = seen[stepTool]
	return r
}

// encoder writes the steps of a plan in one protocol's wire format.
type encoder interface {
	// frame appends the bytes of st to dst; nothing when the protocol has
	// no counterpart of the step.
	frame(dst []byte, st step) []byte
	// body returns the complete non-streaming response.
	body() []byte
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

// appendTyped appends an event with an `event:` line (Anthropic, Responses).
func appendTyped(dst []byte, typ string, v any) []byte { return sse.AppendEvent(dst, typ, marshal(v)) }

// appendCRLF appends one `data:` event framed with CRLF line ends, as
// Gemini's servers send them (see the gemini fixtures).
func appendCRLF(dst []byte, v any) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, marshal(v)...)
	return append(dst, "\r\n\r\n"...)
}

// null is a JSON null for fields that providers send as null rather than
// leave out.
var null = json.RawMessage("null")

func ptr[T any](v T) *T { return &v }

// errorFamily is how a protocol writes its errors.
type errorFamily uint8

const (
	familyOpenAI errorFamily = iota
	familyAnthropic
	familyGemini
	familyBedrock // {"message"} and x-amzn-ErrorType
)

func familyOf(api API) errorFamily {
	switch api {
	case APIAnthropic:
		return familyAnthropic
	case APIGemini:
		return familyGemini
	case APIConverse, APIBedrockInvoke:
		return familyBedrock
	}
	return familyOpenAI
}

// apiError is an error response in a protocol's own format.
type apiError struct {
	status int
	msg    string
	param  string // OpenAI's "param", when one field is at fault
	code   string // OpenAI's "code"; empty: derived from status
}

func (e *apiError) Error() string { return strconv.Itoa(e.status) + " " + e.msg }

func errorf(status int, msg string) *apiError { return &apiError{status: status, msg: msg} }

// errorBody returns the JSON error body of family f: the providers'
// documented shapes, shared with the gateway (protocol.ErrorBody).
func errorBody(f errorFamily, e *apiError) []byte {
	pf := protocol.FamilyOpenAI
	switch f {
	case familyAnthropic:
		pf = protocol.FamilyAnthropic
	case familyGemini:
		pf = protocol.FamilyGemini
	}
	return protocol.ErrorBody(pf, protocol.ErrorResponse{Status: e.status, Message: e.msg, Param: e.param, Code: e.code})
}

// writeError sends e as a complete response in family f's format.
func writeError(w http.ResponseWriter, f errorFamily, e *apiError) {
	if f == familyBedrock {
		writeBedrockError(w, e)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if (e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable || e.status == 529) && h.Get("Retry-After") == "" {
		// A profile's rate limit (ratelimit.go) has set its own.
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(e.status)
	w.Write(errorBody(f, e))
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

// keepAlive is the OpenAI APIs' keep-alive. OpenAI documents none and sends
// none: nothing, unless the profile asks for the ": ping" comment that
// OpenAI-compatible routers (OpenRouter's ": OPENROUTER PROCESSING") send.
func (r *response) keepAlive(dst []byte) []byte {
	if !r.commentPings {
		return dst
	}
	return sse.AppendComment(dst, "ping")
}
