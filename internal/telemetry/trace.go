package telemetry

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/ttfx/ttfx/internal/record"
)

// W3C trace-context (https://www.w3.org/TR/trace-context/) header names.
const (
	HeaderTraceparent = "Traceparent"
	HeaderTracestate  = "Tracestate"
)

// maxTracestate bounds the tracestate passed on: the W3C limit is 32
// list members of at most 256 characters each, and a vendor that sends
// more may be truncated by any participant (§3.3.1.5); 512 bytes keeps
// what real tracers send and stops a client from inflating every upstream
// request.
const maxTracestate = 512

// Tracing joins each request to its caller's trace and hands the
// gateway's span context to the upstream (issue 17). It implements the
// relay's Tracer hook; the spans themselves are built by OTel from the
// record after the request ended, with the ids chosen here (idGenerator).
//
// An incoming traceparent that parses makes the request's span a child of
// the caller's: same trace id, the caller's span as parent, its sampled
// flag kept. Without one (or with a malformed one, which the W3C rules say
// to ignore) the request starts a trace of its own, sampled. tracestate is
// passed on as received, bounded, only with a valid traceparent.
type Tracing struct{}

// Start implements relay.Tracer: it runs at t0 on the request's goroutine.
func (Tracing) Start(h http.Header, rec *record.Record) {
	tid, parent, flags, ok := parseTraceparent(h.Get(HeaderTraceparent))
	if ok {
		rec.Trace.ParentSpanID = parent
		rec.Trace.Sampled = flags&1 == 1
		if st := strings.Join(h.Values(HeaderTracestate), ","); st != "" && len(st) <= maxTracestate && printableASCII(st) {
			rec.Trace.State = st
		}
	} else {
		tid = newTraceID()
		rec.Trace.Sampled = true
	}
	rec.TraceID = tid
	rec.Trace.SpanID = newSpanID()
}

// Inject implements relay.Tracer: the upstream request carries a
// traceparent whose parent is a new span of the gateway — the attempt's
// CLIENT span, a child of the request's span — and the caller's
// tracestate.
func (Tracing) Inject(h http.Header, rec *record.Record) string {
	if rec.TraceID == "" {
		return ""
	}
	id := newSpanID()
	flags := "00"
	if rec.Trace.Sampled {
		flags = "01"
	}
	h.Set(HeaderTraceparent, "00-"+rec.TraceID+"-"+id+"-"+flags)
	if rec.Trace.State != "" {
		h.Set(HeaderTracestate, rec.Trace.State)
	} else {
		h.Del(HeaderTracestate)
	}
	return id
}

// parseTraceparent parses a W3C traceparent "VV-TRACEID-PARENTID-FLAGS".
// Version 00 must have exactly four fields; a higher version may append
// more after a dash (§3.2.4: parse what is known). Version ff, all-zero
// ids and upper-case hex are invalid.
func parseTraceparent(v string) (traceID, parentID string, flags byte, ok bool) {
	v = strings.TrimSpace(v)
	if len(v) < 55 {
		return "", "", 0, false
	}
	ver := v[0:2]
	if !lowerHex(ver) || ver == "ff" || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return "", "", 0, false
	}
	if len(v) > 55 && (ver == "00" || v[55] != '-') {
		return "", "", 0, false
	}
	traceID, parentID = v[3:35], v[36:52]
	if !lowerHex(traceID) || !lowerHex(parentID) || !lowerHex(v[53:55]) ||
		allZero(traceID) || allZero(parentID) {
		return "", "", 0, false
	}
	b, _ := hex.DecodeString(v[53:55])
	return traceID, parentID, b[0], true
}

func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(s string) bool { return strings.Trim(s, "0") == "" }

// printableASCII reports whether s holds only the characters a tracestate
// may (0x20–0x7e): anything else is not passed upstream.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// newTraceID and newSpanID draw from math/rand/v2's per-goroutine ChaCha8
// source, as the OpenTelemetry SDK's own generator draws from math/rand:
// ids must be unique, not secret.
func newTraceID() string {
	var b [16]byte
	for {
		putUint64(b[:8], rand.Uint64())
		putUint64(b[8:], rand.Uint64())
		if b != [16]byte{} {
			return hex.EncodeToString(b[:])
		}
	}
}

func newSpanID() string {
	var b [8]byte
	for b == [8]byte{} {
		putUint64(b[:], rand.Uint64())
	}
	return hex.EncodeToString(b[:])
}

func putUint64(b []byte, v uint64) {
	for i := range 8 {
		b[i] = byte(v >> (56 - 8*i))
	}
}

// idKey carries the ids a span about to be started must have.
type idKey struct{}

type chosenIDs struct {
	trace trace.TraceID
	span  trace.SpanID
}

// withIDs returns ctx asking idGenerator for these ids.
func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idKey{}, chosenIDs{tid, sid})
}

// idGenerator gives a span the ids the relay already announced (in the
// record, and in the traceparent it sent upstream), so that the span built
// after the fact is the one the upstream's spans name as their parent.
// Spans started without chosen ids get random ones.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if c, ok := ctx.Value(idKey{}).(chosenIDs); ok && c.trace.IsValid() && c.span.IsValid() {
		return c.trace, c.span
	}
	tid, _ := trace.TraceIDFromHex(newTraceID())
	sid, _ := trace.SpanIDFromHex(newSpanID())
	return tid, sid
}

func (idGenerator) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	if c, ok := ctx.Value(idKey{}).(chosenIDs); ok && c.span.IsValid() {
		return c.span
	}
	sid, _ := trace.SpanIDFromHex(newSpanID())
	return sid
}
