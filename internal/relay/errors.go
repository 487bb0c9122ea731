package relay

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/wire"
)

// HTTPError is an error with what the client sees kept apart from what is
// only logged: Code and Msg go to the client in the protocol's error
// format; Err, if set, stays in logs and in the record's error summary.
type HTTPError struct {
	Code   int    // HTTP status sent to the client
	Type   string // error type for formats that name one, e.g. invalid_request_error; empty: from Code
	Msg    string // message the client sees
	Status string // terminal status of the record (record.Status…)
	Err    error  // cause, for logs
}

func (e *HTTPError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %v", e.Code, e.Msg, e.Err)
	}
	return fmt.Sprintf("%d %s", e.Code, e.Msg)
}

func (e *HTTPError) Unwrap() error { return e.Err }

// Errors the gateway raises itself when a timer fires; they are the causes
// of the cancelled upstream context, so a failed read can say why it failed.
var (
	errHeaderTimeout      = errors.New("upstream headers timed out")
	errFirstOutputTimeout = errors.New("no output from upstream before the first-output timeout")
	errIdleTimeout        = errors.New("upstream stream idle for longer than the idle timeout")
	errTotalTimeout       = errors.New("request passed the total timeout")
	errShutdown           = errors.New("the gateway is shutting down")
)

// errNoResponse is the error of a transport that returned neither a
// response nor an error (net/http's Client reports the same).
var errNoResponse = errors.New("the transport returned no response and no error")

// writeError sends e to the client in the format of unit, the API the
// client speaks.
func writeError(w http.ResponseWriter, unit *wire.API, e *HTTPError) {
	body := unit.ErrorBody(protocol.ErrorResponse{Status: e.Code, Message: e.Msg, Type: e.Type})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if unit.ErrorHeaders != nil {
		unit.ErrorHeaders(h, e.Code)
	}
	w.WriteHeader(e.Code)
	w.Write(body)
	// Out now, so that t7 (taken next) is after the client has it.
	http.NewResponseController(w).Flush()
}

// streamErrorEvent is the in-band error event that ends a stream of api
// which failed after bytes were sent: the only way left to tell an SSE
// client. Each API unit writes it in the shape its own server sends and
// its official SDKs parse (TestStreamErrorEventShapes, TestNodeSDKErrors);
// seq is the data events relayed so far.
func streamErrorEvent(api string, e *HTTPError, seq int) []byte {
	unit := wire.LookupAPI(api)
	if unit == nil {
		unit = wire.Default()
	}
	return unit.StreamError(wire.Failure{Code: e.Code, Status: e.Status, Msg: e.Msg, Seq: seq})
}
