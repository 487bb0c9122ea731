package relay

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/wire"
)

// MaxModelBytes is the longest model name the gateway accepts. Real model
// names are a few dozen bytes (the longest Vertex and Bedrock ids are under
// 128); the store keeps 256, so a longer one could not even be recorded as
// sent. A 20 MiB name once became a 20 MiB log line and error body.
const MaxModelBytes = 256

// maxEcho bounds any client-supplied text an error message quotes back.
const maxEcho = wire.MaxEcho

// checkModel refuses a model name no channel could serve: too long, not
// UTF-8, or carrying control characters (which would forge log lines).
func checkModel(model string) *HTTPError {
	if len(model) > MaxModelBytes {
		return badRequest("the model name is " + strconv.Itoa(len(model)) + " bytes long; at most " +
			strconv.Itoa(MaxModelBytes) + " are accepted")
	}
	// U+FFFD is what a JSON decoder makes of an invalid byte or a lone
	// surrogate escape (str does): the name the client's bytes spell is
	// not the one the gateway would route on, so it is refused, not
	// rewritten (issue 50).
	if !utf8.ValidString(model) || strings.ContainsFunc(model, isControl) || strings.ContainsRune(model, utf8.RuneError) {
		return badRequest("the model name contains control characters or is not valid UTF-8")
	}
	return nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// echo returns client-supplied text fit to quote in an error message:
// at most maxEcho bytes, cut on a rune boundary, Go-quoted so control
// characters are escaped.
func echo(s string) string { return wire.Echo(s) }

// readKeys are the members of a request body the gateway reads, with the
// members it reads inside them. The upstream reads the same body, so when
// a key appears twice (or twice up to case, which encoding/json folds)
// the gateway might route on one value while the provider acts on the
// other: a request for a cheap model that runs on an expensive one.
var readKeys = map[string][]string{
	"model":          nil,
	"stream":         nil,
	"stream_options": {"include_usage"},
	"user":           nil,
	"metadata":       {"user_id"},
}

// checkDuplicateKeys refuses a body whose object repeats one of readKeys,
// exactly or up to case. Invalid JSON is left to the JSON parser, which
// says where it breaks.
func checkDuplicateKeys(body []byte) *HTTPError {
	d := jsonscan.New(body)
	if !d.Object() {
		return nil
	}
	var seen [8]string
	n := 0
	for {
		k, ok := d.Key()
		if !ok {
			return nil
		}
		name := strings.ToLower(string(k))
		inner, read := readKeys[name]
		if !read {
			if !d.Skip() {
				return nil
			}
			continue
		}
		for _, s := range seen[:n] {
			if s == name {
				return badRequest("the request body has the member " + strconv.Quote(name) +
					" more than once (up to case); send it once")
			}
		}
		if n < len(seen) {
			seen[n] = name
			n++
		}
		if inner != nil && d.Peek() == jsonscan.Object {
			if herr := checkInner(&d, name, inner); herr != nil {
				return herr
			}
			continue
		}
		if !d.Skip() {
			return nil
		}
	}
}

// checkInner walks one object member of readKeys for repeats of inner.
func checkInner(d *jsonscan.Decoder, outer string, inner []string) *HTTPError {
	d.Object()
	var seen []string
	for {
		k, ok := d.Key()
		if !ok {
			return nil
		}
		name := strings.ToLower(string(k))
		for _, want := range inner {
			if name != want {
				continue
			}
			for _, s := range seen {
				if s == name {
					return badRequest("the request body has " + outer + "." + name + " more than once (up to case); send it once")
				}
			}
			seen = append(seen, name)
		}
		if !d.Skip() {
			return nil
		}
	}
}

// checkKeyInURL refuses a key sent as ?key= to an endpoint whose official
// SDKs never send it there. Some APIs' SDKs do (and their provider
// documents it), so their routes accept it (wire.API.KeyInURL); elsewhere a
// key in the URL ends up in access logs, proxies' logs and Referer
// headers, and the client is told which header its protocol uses.
func checkKeyInURL(ep endpoint, r *http.Request) *HTTPError {
	if ep.unit.KeyInURL || !r.URL.Query().Has("key") {
		return nil
	}
	header := ep.unit.KeyHeader
	if ep.shared {
		if u := wire.Guess(r); u != nil {
			header = u.KeyHeader
		}
	}
	return &HTTPError{Code: http.StatusBadRequest, Type: "invalid_request_error", Status: record.StatusBadRequest,
		Msg: "API keys are not accepted in the URL (?key=) on this endpoint: URLs end up in access logs; send the key in the " + header + " header"}
}

// endAttempt gives the relayed attempt the request's outcome: its status
// and, when it failed, why (a failed attempt with an empty error says
// nothing to whoever reads it). Its outcome stays won: its response was
// relayed.
func (x *exchange) endAttempt() {
	at := &x.attempts[len(x.attempts)-1]
	at.Status = x.rec.Status
	if x.rec.Status != record.StatusOK {
		at.Error = x.rec.Error
	}
}

// MaxUpstreamHeaderBytes bounds the response headers the gateway reads from
// an upstream (http.Transport.MaxResponseHeaderBytes, whose default is
// 10 MB). Providers send a few KB; a 2 MiB header relayed as it came broke
// the client (Node's parser stops at 16 KiB, browsers near 256 KiB), so
// such a response is answered 502 and recorded as what it is.
const MaxUpstreamHeaderBytes = 64 << 10

var headerTooLargeMsg = "the upstream's response headers exceed " + strconv.Itoa(MaxUpstreamHeaderBytes) + " bytes, the gateway's limit; the response was not relayed"

// isHeaderTooLarge reports whether err is net/http's refusal of response
// headers past MaxResponseHeaderBytes. The transport gives it no type of
// its own, only its text ("server response headers exceeded N bytes").
func isHeaderTooLarge(err error) bool {
	return strings.Contains(err.Error(), "response headers exceeded")
}

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it keeps each connection in
// its requests' context, so that the relay can have a connection it cuts
// reset rather than closed (see resetOnCut). A server without it works
// the same, except that a cut client is closed the ordinary way.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// resetOnCut makes the connection, while a response streams, end with a
// reset if net/http closes it, which it does at once when a write fails.
// The write that fails is one to a client that stopped reading (cut at the
// idle limit) or went away. Closed the ordinary way, its FIN waits in the
// send buffer behind bytes the client does not read, so it never learns the
// response ended; a reset (SO_LINGER 0) drops those bytes and tells it at
// once. The returned func restores the ordinary close, for a response that
// was written out (keep-alive and a later close must not drop bytes). Over
// HTTP/2 the connection is shared by streams and is left alone: net/http
// resets the stream itself.
func (x *exchange) resetOnCut() (restore func()) {
	c, _ := x.r.Context().Value(connKey{}).(net.Conn)
	if nc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = nc.NetConn()
	}
	tc, ok := c.(*net.TCPConn)
	if !ok || x.r.ProtoMajor != 1 || tc.SetLinger(0) != nil {
		return func() {}
	}
	return func() { tc.SetLinger(-1) }
}
