package relay

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/wire"
)

// endpoint describes one route of the gateway: an endpoint of a
// registered API unit (internal/wire), with what the relay reads of it
// copied out for the request path.
type endpoint struct {
	pattern  string       // ServeMux pattern
	api      string       // record API name
	proto    string       // the API's family: the protocol a channel must speak
	classify protocol.API // classifier of its streams; "" when it has none
	response protocol.API // parser of its non-streaming responses; "" when it has none
	hasBody  bool
	usage    bool // the gateway asks for stream_options.include_usage (SPEC §3)
	shared   bool // several providers' APIs share the path: the client's headers say whose it is
	// target splits a {target} path value into the model and the
	// streaming flag; nil when the model is in the body.
	target func(string) (string, bool, error)
	unit   *wire.API
	// path is the API's own path a provider's spelling of it is relayed
	// as, modelVar the wildcard naming the model, dropQuery the client's
	// query parameters not passed on (wire.Endpoint).
	path      string
	modelVar  string
	dropQuery []string
}

var (
	endpointsOnce sync.Once
	endpointList  []endpoint
)

// endpoints returns the routes of every registered API, in the registry's
// order. The registry is complete once the program's init functions ran.
func endpoints() []endpoint {
	endpointsOnce.Do(func() {
		for _, a := range wire.APIs() {
			for _, e := range a.Endpoints {
				endpointList = append(endpointList, endpoint{
					pattern: e.Pattern, api: a.Name, proto: a.Family,
					classify: a.Stream, response: a.Response, hasBody: e.HasBody,
					usage: a.UsageOption, shared: e.SharedPath, target: e.Target, unit: a,
					path: e.Path, modelVar: e.Model, dropQuery: e.DropQuery,
				})
			}
		}
	})
	return endpointList
}

// clientRequest is what the gateway reads from a client's request: only
// what routing and timing need. The prompt is never looked at beyond this.
type clientRequest struct {
	model       string
	stream      bool
	clientUsage bool   // the client asked for stream_options.include_usage itself
	user        string // a client-sent user id, to be hashed; never stored
	upstreamURI string // path and query to request upstream

	// The prompt, until the response is committed (see release). mu
	// guards it: hedged attempts build their requests on their own
	// goroutines.
	mu       sync.Mutex
	body     []byte  // the client's body, sent upstream as it is
	usage    *splice // how to add stream_options.include_usage to body; nil when not applicable
	released bool

	// modelAt and modelCut delimit the value of the body's "model"
	// (modelCut 0: the model is not in the body), which a channel that
	// knows the model by another name (route.Channel.UpstreamModel)
	// replaces; modelInPath is where the model starts in upstreamURI
	// when the path names it instead (-1: it does not).
	modelAt, modelCut int
	modelInPath       int
	// modelSet is set when the client's path named the model (a
	// deployment) and the body did not name the same: the body's model is
	// always replaced, or, when modelNew, added as a member at modelAt
	// (modelAt == modelCut), followed by a comma when modelComma.
	modelSet, modelNew, modelComma bool
}

// splice is an edit of a body made as it is sent: body[at:cut] is replaced
// by insert. The body with the usage option is never built: the prompt is
// held once, not twice (issue 15).
type splice struct {
	at, cut int
	insert  string
}

// prompt is a body to send upstream, in up to five pieces: the client's
// bytes around at most two splices (the usage option, the model's name).
type prompt [5][]byte

func (p prompt) size() int { return len(p[0]) + len(p[1]) + len(p[2]) + len(p[3]) + len(p[4]) }

// payload returns the body to send to a channel: with the usage option
// added unless the channel does not take it (noUsage), and whether it was.
// ok is false once the prompt was released.
func (cr *clientRequest) payload(noUsage bool) (p prompt, injected, ok bool) {
	return cr.payloadFor(noUsage, "")
}

// payloadFor is payload for a channel that sends model as the body's
// model (its name for the model asked); "" or the name asked keep the
// client's bytes.
func (cr *clientRequest) payloadFor(noUsage bool, model string) (p prompt, injected, ok bool) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if cr.released {
		return p, false, false
	}
	var edits [2]splice
	n := 0
	if u := cr.usage; u != nil && !noUsage {
		edits[n] = *u
		n++
		injected = true
	}
	if model == "" {
		model = cr.model
	}
	if cr.modelCut > 0 && (model != cr.model || cr.modelSet) {
		insert := jsonString(model)
		if cr.modelNew {
			insert = `"model":` + insert
			if cr.modelComma {
				insert += ","
			}
		}
		edits[n] = splice{at: cr.modelAt, cut: cr.modelCut, insert: insert}
		n++
	}
	if n == 2 && edits[1].at < edits[0].at {
		edits[0], edits[1] = edits[1], edits[0]
	}
	// The client's bytes between the edits are shared, not copied.
	i, from := 0, 0
	for _, e := range edits[:n] {
		p[i], p[i+1] = cr.body[from:e.at:e.at], []byte(e.insert)
		i, from = i+2, e.cut
	}
	p[i] = cr.body[from:]
	return p, injected, true
}

// jsonString encodes s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// release lets go of the prompt once a response is committed: no attempt
// can follow, and a stream that lasts minutes need not hold a prompt of
// hundreds of kilobytes for its whole life (issue 15).
func (cr *clientRequest) release() {
	cr.mu.Lock()
	cr.body, cr.usage, cr.released = nil, nil, true
	cr.mu.Unlock()
}

// errPromptReleased is what an upstream request's GetBody answers once the
// prompt was released: by then no attempt can be retried.
var errPromptReleased = errors.New("the request body was released after the response was committed")

// promptReader is an upstream request's body. It lets go of each piece of
// the prompt as it is read, and of what is left when it is closed (the
// transport may give up on a body an upstream answered early), so that the
// request a response still points to does not keep the prompt alive while
// the stream lasts. The transport may close it while its writer reads.
type promptReader struct {
	mu sync.Mutex
	p  prompt
}

func (r *promptReader) Read(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i := range r.p {
		if n == len(b) {
			break
		}
		c := copy(b[n:], r.p[i])
		n += c
		if r.p[i] = r.p[i][c:]; len(r.p[i]) == 0 {
			r.p[i] = nil
		}
	}
	if n == 0 && len(b) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *promptReader) Close() error {
	r.mu.Lock()
	r.p = prompt{}
	r.mu.Unlock()
	return nil
}

// parseRequest reads the fields the gateway needs from a client request
// body and prepares the upstream body. It returns an *HTTPError for bad input.
func parseRequest(ep endpoint, r *http.Request, body []byte) (*clientRequest, *HTTPError) {
	// The upstream request keeps the client's query (an alt=sse)
	// but never a key passed as ?key=: the channel's own key goes upstream.
	cr := &clientRequest{body: body, upstreamURI: r.URL.Path, modelInPath: -1}
	if ep.path != "" {
		cr.upstreamURI = ep.path
	}
	// Most requests have no query: nothing to parse and print again.
	if r.URL.RawQuery != "" {
		q := r.URL.Query()
		q.Del("key")
		for _, k := range ep.dropQuery {
			q.Del(k)
		}
		if enc := q.Encode(); enc != "" {
			cr.upstreamURI += "?" + enc
		}
	}
	if !ep.hasBody {
		return cr, nil
	}
	if ep.target != nil {
		model, stream, err := ep.target(r.PathValue("target"))
		if err != nil {
			var te *wire.TargetError
			if errors.As(err, &te) && te.Code == http.StatusNotFound {
				return nil, &HTTPError{Code: http.StatusNotFound, Type: "not_found_error", Msg: te.Msg, Status: record.StatusBadRequest}
			}
			return nil, badRequest(err.Error())
		}
		cr.model, cr.stream = model, stream
		// The target is the path's last segment and starts with the
		// model (wire.Endpoint.Target).
		if t := r.PathValue("target"); strings.HasSuffix(r.URL.Path, t) && strings.HasPrefix(t, model) {
			cr.modelInPath = len(r.URL.Path) - len(t)
		}
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("the request body is empty; want a JSON object")
	}
	if herr := checkDuplicateKeys(body); herr != nil {
		return nil, herr
	}
	var f bodyFields
	if herr := f.scan(body); herr != nil {
		return nil, herr
	}
	if ep.target == nil {
		cr.model, cr.modelAt, cr.modelCut = f.model, f.modelAt, f.modelCut
		if ep.modelVar != "" {
			cr.pathModel(r.PathValue(ep.modelVar), &f)
		}
		if cr.model == "" {
			return nil, badRequest("the request names no model")
		}
		switch s := string(f.stream); s {
		case "", "null", "false":
		case "true":
			cr.stream = true
		default:
			return nil, badRequest("stream must be true or false")
		}
	}
	if herr := checkModel(cr.model); herr != nil {
		return nil, herr
	}
	cr.user = f.user
	if cr.user == "" {
		cr.user = f.metadataUser
	}
	cr.clientUsage = f.includeUsage
	// SPEC §3: ask OpenAI-compatible upstreams for the usage chunk, and
	// strip it again when the client did not ask for it.
	if cr.stream && !cr.clientUsage && ep.usage {
		cr.usage = f.withIncludeUsage()
	}
	return cr, nil
}

// pathModel makes the model the client's path named (a
// deployment) the request's: the body the upstream gets names it, its own
// "model" replaced, or one added after the opening brace when it has none.
func (cr *clientRequest) pathModel(model string, f *bodyFields) {
	if model == "" { // no wildcard matches an empty segment; kept for safety
		return
	}
	cr.model = model
	if f.model == model && f.modelCut > 0 {
		return
	}
	cr.modelSet = true
	if f.modelCut == 0 {
		// The body is a JSON object (scanned): its first non-space byte
		// is the brace.
		at := bytes.IndexByte(cr.body, '{') + 1
		cr.modelAt, cr.modelCut, cr.modelNew, cr.modelComma = at, at, true, f.members > 0
	}
}

// bodyFields are the top-level members of a client's JSON body the gateway
// reads, found in one pass of the zero-allocation scanner that also
// validates the whole body (the grammar of encoding/json). Before, the body
// was unmarshalled into a struct and, for the usage option, unmarshalled
// into a map and marshalled again: three passes over a prompt that may be
// megabytes, and about 60 allocations per request (issue 15).
type bodyFields struct {
	model, user, metadataUser string
	modelAt, modelCut         int    // the offsets of model's value; modelCut 0 when absent
	stream                    []byte // the raw value of "stream"; nil when absent
	includeUsage              bool   // stream_options.include_usage is true

	// Where the usage option goes, as offsets into the body: the value of
	// stream_options (-1 when absent), whether it is an object and has
	// members, the value of its include_usage (-1 when absent), the
	// top-level closing brace and how many members the top level has.
	optsStart, optsEnd int
	optsObject         bool
	optsMembers        int
	usageStart         int
	usageEnd           int
	closing            int
	members            int
	optsSeen           int // stream_options members: with two, the splice is not attempted
}

// scan walks body, a JSON object, keeping what parseRequest needs. Keys
// match exactly, as the providers' own APIs match them.
func (f *bodyFields) scan(body []byte) *HTTPError {
	*f = bodyFields{optsStart: -1, optsEnd: -1, usageStart: -1, usageEnd: -1}
	d := jsonscan.New(body)
	if k := d.Peek(); k != jsonscan.Object {
		if d.Skip() && d.End() {
			return badRequest("the request body must be a JSON object, not " + k.String())
		}
		return syntaxError(&d)
	}
	d.Object()
	for {
		key, ok := d.Key()
		if !ok {
			break
		}
		f.members++
		switch string(key) {
		case "model":
			at := d.Offset()
			s, ok := str(&d)
			if !ok {
				return wrongType(&d, body, "model")
			}
			f.model, f.modelAt, f.modelCut = s, at, d.Offset()
		case "stream":
			raw, _ := d.SkipRaw()
			f.stream = raw
		case "user":
			f.user, _ = strOrSkip(&d)
		case "metadata":
			switch d.Peek() {
			case jsonscan.Null:
				d.Skip()
			case jsonscan.Object:
				d.Object()
				for {
					k, ok := d.Key()
					if !ok {
						break
					}
					if string(k) == "user_id" {
						f.metadataUser, _ = strOrSkip(&d)
					} else {
						d.Skip()
					}
				}
			default:
				return wrongType(&d, body, "metadata")
			}
		case "stream_options":
			f.optsSeen++
			f.optsStart, f.optsObject, f.optsMembers = d.Offset(), false, 0
			f.usageStart, f.usageEnd, f.includeUsage = -1, -1, false
			switch d.Peek() {
			case jsonscan.Null:
				f.optsStart = d.Offset()
				d.Skip()
			case jsonscan.Object:
				f.optsStart, f.optsObject = d.Offset(), true
				d.Object()
				for {
					k, ok := d.Key()
					if !ok {
						break
					}
					f.optsMembers++
					if string(k) != "include_usage" {
						d.Skip()
						continue
					}
					switch d.Peek() {
					case jsonscan.Bool, jsonscan.Null:
						f.usageStart = d.Offset()
						raw, _ := d.SkipRaw()
						f.usageEnd = d.Offset()
						f.includeUsage = string(raw) == "true"
					default:
						return wrongType(&d, body, "stream_options.include_usage")
					}
				}
			default:
				return wrongType(&d, body, "stream_options")
			}
			f.optsEnd = d.Offset()
		default:
			d.Skip()
		}
	}
	f.closing = d.Offset() - 1
	if !d.End() {
		return syntaxError(&d)
	}
	return nil
}

// str reads a string (unescaped, as encoding/json decodes it) or null.
func str(d *jsonscan.Decoder) (string, bool) {
	switch d.Peek() {
	case jsonscan.Null:
		return "", d.Skip()
	case jsonscan.String:
		raw, ok := d.Str()
		if !ok {
			return "", false
		}
		if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
			return string(raw), true
		}
		return string(jsonscan.AppendUnescaped(nil, raw)), true
	}
	return "", false
}

// strOrSkip reads a string, or skips a value of another kind and returns "".
func strOrSkip(d *jsonscan.Decoder) (string, bool) {
	if d.Peek() == jsonscan.String {
		return str(d)
	}
	return "", d.Skip()
}

// wrongType answers a member of the wrong type, unless the body is not
// JSON at all (a syntax error is what the client needs to hear then).
func wrongType(d *jsonscan.Decoder, body []byte, field string) *HTTPError {
	if d.Failed() {
		return syntaxError(d)
	}
	if e := jsonscan.New(body); !e.Skip() || !e.End() {
		return syntaxError(&e)
	}
	return badRequest("the request body is not valid JSON: field " + field + " has the wrong type")
}

// syntaxError describes where a body stopped being JSON, without echoing
// the client's bytes.
func syntaxError(d *jsonscan.Decoder) *HTTPError {
	return badRequest("the request body is not valid JSON: syntax error at byte " + strconv.Itoa(d.Offset()))
}

const includeUsage = `"include_usage":true`

// withIncludeUsage returns the splice that sets
// stream_options.include_usage to true in the client's bytes (nothing else
// is re-encoded), or nil when the body names stream_options twice and the
// splice would be ambiguous (the upstream then gets the body as it is; the
// tokens are estimated).
func (f *bodyFields) withIncludeUsage() *splice {
	if f.optsSeen > 1 {
		return nil
	}
	switch {
	case f.usageStart >= 0: // "include_usage": false or null
		return &splice{at: f.usageStart, cut: f.usageEnd, insert: "true"}
	case f.optsObject: // an object without include_usage
		at := f.optsStart + 1
		if f.optsMembers > 0 {
			return &splice{at: at, cut: at, insert: includeUsage + ","}
		}
		return &splice{at: at, cut: at, insert: includeUsage}
	case f.optsStart >= 0: // "stream_options": null
		return &splice{at: f.optsStart, cut: f.optsEnd, insert: "{" + includeUsage + "}"}
	}
	if f.members > 0 {
		return &splice{at: f.closing, cut: f.closing, insert: `,"stream_options":{` + includeUsage + "}"}
	}
	return &splice{at: f.closing, cut: f.closing, insert: `"stream_options":{` + includeUsage + "}"}
}

func badRequest(msg string) *HTTPError {
	return &HTTPError{Code: http.StatusBadRequest, Type: "invalid_request_error", Msg: msg, Status: record.StatusBadRequest}
}
