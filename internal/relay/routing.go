package relay

import (
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/timeline"
)

// observe tells the channel's health how record attempt ai (of attempt a)
// ended. relayed marks the attempt whose stream the request's
// marks come from: only its first visible text is known.
func (x *exchange) observe(h *route.Health, a *attempt, ai int, relayed bool) {
	if ai < 0 || ai >= len(x.attempts) {
		return
	}
	at := x.attempts[ai]
	res := route.Result{Kind: healthKind(at), Stream: x.req.stream}
	if ti := a.index; ti >= 0 {
		m := x.tl.Attempts()[ti]
		if !m.Headers.IsZero() {
			res.Headers, res.HasHeaders = m.Headers.Sub(m.Start), true
		}
		start, _ := at.UpstreamStartMs.Get()
		if t4, ok := at.FirstResponseAtMs.Get(); ok {
			res.FirstResponse, res.HasFirstResponse = t4-start, true
		}
		if a.early {
			// Told at t4 already (outputReached).
			res.HasHeaders, res.HasFirstResponse = false, false
		}
		if relayed {
			if t5, ok := x.tl.Since(timeline.T5).Get(); ok {
				res.FirstText, res.HasFirstText = t5-start, true
			}
		}
	}
	h.Observe(res)
}

// healthKind says how an attempt ended, for the channel's health and its
// outlier ejection.
func healthKind(at record.Attempt) route.Kind {
	if at.Outcome == record.OutcomeCancelled {
		return route.KindCancelled
	}
	switch at.Status {
	case record.StatusOK:
		return route.KindOK
	case record.StatusUpstreamConnectError:
		return route.KindConnect
	case record.StatusHeaderTimeout, record.StatusFirstOutputTimeout:
		return route.KindTimeout
	case record.StatusIdleTimeout, record.StatusTotalTimeout:
		return route.KindOtherTimeout
	case record.StatusRateLimited:
		return route.KindRateLimit
	case record.StatusClientCancelled:
		return route.KindCancelled
	case record.StatusUpstreamHTTPError:
		if at.HTTPStatus >= 500 {
			return route.KindHTTP5xx
		}
		return route.KindHTTP4xx
	case record.StatusUpstreamStreamError, record.StatusTruncated:
		// A stream that broke before any output is as good as a
		// connection that failed (Envoy's gateway failure).
		if !at.FirstResponseAtMs.Valid() {
			return route.KindConnect
		}
		return route.KindStreamError
	}
	return route.KindStreamError
}

// hedges reports whether the request races a hedge: its route hedges, it
// streams events the classifier reads (t4 is what the race is for), and
// there is a second channel.
func (x *exchange) hedges(p *route.Plan) bool {
	return p.Route != nil && p.Route.Hedge != nil && x.req.stream && x.ep.classify != "" && len(p.Channels) > 1
}

// censored is the result of a race loser cancelled at now: its first
// response (if it had none) is at least the time it was given.
func censored(start, now time.Time) route.Result {
	d := now.Sub(start)
	return route.Result{Kind: route.KindCancelled, Stream: true, Censored: true,
		FirstResponse: d, HasFirstResponse: true, FirstText: d, HasFirstText: true}
}

// outputReached tells the channel's health, at t4, how long the attempt
// took to its headers and its first output, without waiting for the end
// of a stream that may run for minutes: the latency strategy and a probe
// after an ejection learn of it at once. Once per attempt, not per event.
func (x *exchange) outputReached(a *attempt, at time.Time) {
	if a.h == nil || a.index < 0 {
		return
	}
	m := x.tl.Attempts()[a.index]
	res := route.Result{Kind: route.KindOK, Stream: x.req.stream, FirstResponse: at.Sub(m.Start), HasFirstResponse: true}
	if !m.Headers.IsZero() {
		res.Headers, res.HasHeaders = m.Headers.Sub(m.Start), true
	}
	a.h.Output(res)
	a.early = true
}
