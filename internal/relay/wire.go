package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
)

// errNoAnswer marks an upstream that took the whole request and then
// closed or reset the connection without answering: it was reached, so this
// is not a connect error (issue 14), yet nothing reached the client, so
// the next channel may still be tried.
var errNoAnswer = errors.New("upstream closed the connection after the request was sent")

// traceSent returns ctx with a client trace that sets sent once the whole
// request has been written to the upstream: a failure before that is a
// connect failure, one after it is the upstream failing to answer.
func traceSent(ctx context.Context, sent *atomic.Bool) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				sent.Store(true)
			}
		},
	})
}

// noAnswer is the error of an attempt whose upstream took the request and
// ended the connection before sending headers.
func noAnswer(err error) *HTTPError {
	return &HTTPError{Code: http.StatusBadGateway, Type: "api_error",
		Msg:    "upstream closed the connection before answering (the request was sent): " + netErrorText(err),
		Status: record.StatusUpstreamStreamError, Err: errors.Join(errNoAnswer, err)}
}

// bodyOutcome tells, for a non-streaming body that relayed completely but
// did not parse as api's response, what it was: JSON cut short (or no body
// at all) is truncated — the connection closed well, the answer did not
// finish — and anything else is a broken upstream, as the streaming path
// records them. streamed marks a non-SSE stream (a JSON array sent piece by piece),
// whose shape is not one response: only its completeness is judged there.
// It returns "" when the body is to be left ok.
func bodyOutcome(api protocol.API, body []byte, streamed bool) (status, msg string) {
	var v json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	err := d.Decode(&v)
	switch {
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return record.StatusTruncated, "upstream closed the response before its JSON body was complete"
	case err != nil || d.More():
		return record.StatusUpstreamStreamError, "upstream sent a body that is not JSON"
	case streamed:
		return "", ""
	}
	return record.StatusUpstreamStreamError, "upstream sent JSON that is not a " + string(api) + " response"
}
