package relay

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// Hedged first output (docs/SPEC.md "Routing"; Envoy's hedge policy and
// gRPC's hedgingDelay). A hedged request runs each attempt on its own
// goroutine, the racer, up to its first effective output (t4): the racer
// sends the request, waits for the headers and reads and classifies the
// events, holding them back, because the client may get only one stream.
// If the first attempt has no output after the route's delay, a second
// starts on the next channel. The first to reach t4 wins: the others are
// cancelled at once (their upstream requests' contexts end, which closes
// their connections), and the handler relays the winner — the events it
// held, at the times they arrived, then the rest of its stream as the
// unhedged relay does. Nothing reaches the client before a winner is known,
// so a hedge can never start after the client got a byte.
//
// The handler goroutine owns the timeline and the record throughout:
// racers only report (raceEvent) and hand their state over.

// maxHeld bounds what a racer holds back before its first output. An
// upstream that sends more than this in metadata and heartbeats is relayed
// as it is, as the unhedged relay would have done from the start: the race
// ends there rather than the gateway buffering without bound.
const maxHeld = 1 << 20

// errHedgeLost cancels the attempts that lost the race.
var errHedgeLost = errors.New("another attempt reached first output first")

// racer is one attempt of a hedged request.
type racer struct {
	a    *attempt
	h    *route.Health
	role string
	ti   int       // timeline attempt
	t1   time.Time // upstream start
	done bool      // it reported its last event (set by the racer)

	// Owned by the handler goroutine.
	ended     bool      // its failure was processed
	cancelled time.Time // when it lost the race; zero if it did not

	herr    *HTTPError // why it failed
	errBody []byte     // the upstream's error body, when it is to be relayed
	rd      wire.PieceReader
	st      *protocol.Stream
	held    []heldPiece
}

// heldPiece is a stream piece read before the race was decided.
type heldPiece struct {
	p   sse.Piece // Raw is a copy owned by the piece
	at  time.Time
	res protocol.Result
}

type raceKind uint8

const (
	raceHeaders raceKind = iota + 1 // 2xx headers came (at)
	raceOutput                      // reached t4, or a non-event-stream body began, or the stream ended complete
	raceFailed                      // failed before output: herr says why
)

type raceEvent struct {
	r    *racer
	kind raceKind
	at   time.Time
}

// hedgeRace is a hedged request's racers, shared by race, decide and
// endRace.
type hedgeRace struct {
	events chan raceEvent
	wg     sync.WaitGroup
	racers []*racer
	winner *racer
}

// race runs a hedged request over the plan's channels: decide runs the
// race, and the winner is relayed from this small frame, which is on the
// stack below every flush of the stream (issue 15).
func (x *exchange) race(plan *route.Plan) {
	hr := &hedgeRace{events: make(chan raceEvent, 2*len(plan.Channels))}
	defer x.endRace(hr)
	w := x.decide(plan, hr)
	if w == nil {
		return // every attempt failed, and the client has been answered
	}
	x.serveResponse(w.a, false)
	w.a.stop()
	w.h.Release()
	x.observe(w.h, w.a, len(x.attempts)-1, true)
}

// endRace waits for the racers' goroutines and records the losers.
func (x *exchange) endRace(hr *hedgeRace) {
	// Cancelled racers end promptly; their timers stop, and they are
	// recorded, only once their goroutines no longer touch them.
	hr.wg.Wait()
	// Headers that came while the race was being decided.
	for len(hr.events) > 0 {
		if ev := <-hr.events; ev.kind == raceHeaders {
			x.tl.GotHeadersAt(ev.r.ti, ev.at)
		}
	}
	for _, rc := range hr.racers {
		if rc != hr.winner {
			rc.a.stop()
		}
		if !rc.cancelled.IsZero() {
			x.recordLoser(rc, hr.winner)
		}
	}
}

// decide races the attempts to the first output and returns the winner,
// made the request's relayed attempt; nil when none won (the client has
// then been answered).
func (x *exchange) decide(plan *route.Plan, hr *hedgeRace) *racer {
	events := hr.events
	next := 0
	var winner, lastFailed *racer
	launch := func(role string) *racer {
		ch, h := plan.Channels[next], plan.Health[next]
		count := h.Acquire()
		if next == 0 {
			x.rec.Inflight.Channel = int(count)
		}
		next++
		ctx, cancel := context.WithCancelCause(x.r.Context())
		a := &attempt{ch: ch, ctx: ctx, cancel: cancel, h: h}
		a.unlink = context.AfterFunc(x.g.life, func() { cancel(errShutdown) })
		a.after(x.tl.Start().Add(ch.Timeouts.Total).Sub(x.tl.Now()), errTotalTimeout)
		if x.req.stream {
			a.firstOutput = a.after(ch.Timeouts.FirstOutput, errFirstOutputTimeout)
		}
		a.index = x.tl.BeginAttempt()
		rc := &racer{a: a, h: h, role: role, ti: a.index, t1: x.tl.Attempts()[a.index].Start}
		hr.racers = append(hr.racers, rc)
		hr.wg.Go(func() { x.runRacer(rc, events) })
		return rc
	}

	var timer *time.Timer
	var timerC <-chan time.Time
	hedged := false
	arm := func(i int) {
		if hedged || next >= len(plan.Channels) {
			return
		}
		if d, ok := plan.HedgeDelay(i); ok {
			if timer == nil {
				timer = time.NewTimer(d)
			} else {
				timer.Reset(d)
			}
			timerC = timer.C
		}
	}
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	launch(record.RolePrimary)
	arm(0)
	running := 1
	for winner == nil && running > 0 {
		select {
		case <-timerC:
			timerC = nil
			if running == 1 && next < len(plan.Channels) && x.r.Context().Err() == nil && plan.TryHedge() {
				hedged = true
				launch(record.RoleHedge)
				running++
			}
		case ev := <-events:
			rc := ev.r
			switch ev.kind {
			case raceHeaders:
				x.tl.GotHeadersAt(rc.ti, ev.at)
				continue
			case raceOutput:
				winner = rc
				continue
			}
			// raceFailed
			running--
			rc.ended = true
			rc.h.Release()
			x.recordRacer(rc, rc.herr.Status, rc.herr.Msg, record.OutcomeFailed)
			x.observe(rc.h, rc.a, len(x.attempts)-1, false)
			if rc.role == record.RoleHedge {
				plan.HedgeDone(false)
			}
			lastFailed = rc
			if running > 0 {
				continue // the other attempt may still answer
			}
			if !retryable(rc.herr) || next >= len(plan.Channels) || x.r.Context().Err() != nil {
				break
			}
			launch(record.RoleRetry)
			running++
			i := next - 1
			if timer != nil {
				timer.Stop()
			}
			timerC = nil
			arm(i)
		}
	}

	if winner == nil {
		if x.r.Context().Err() != nil {
			x.rec.Status = record.StatusClientCancelled
			x.rec.Error = "client closed the request before an upstream answered"
			return nil
		}
		x.useChannel(lastFailed.a.ch)
		var resp *http.Response
		if lastFailed.errBody != nil {
			resp = lastFailed.a.resp
		}
		x.failAll(lastFailed.herr, resp, lastFailed.errBody, lastFailed.ti)
		return nil
	}
	hr.winner = winner

	// The race is decided: cancel the others at once, so that their
	// upstreams see the cancel. They are recorded when their goroutines
	// have ended (recordLoser), after the winner's relay.
	for _, rc := range hr.racers {
		if rc == winner || rc.ended {
			continue
		}
		rc.a.cancel(errHedgeLost)
		rc.cancelled = x.tl.Now()
		rc.h.Release()
		if rc.role == record.RoleHedge {
			plan.HedgeDone(false)
		}
	}
	if winner.role == record.RoleHedge {
		plan.HedgeDone(true)
	}

	a := winner.a
	a.rd, a.st, a.held = winner.rd, winner.st, winner.held
	x.useChannel(a.ch)
	x.attempts = append(x.attempts, record.Attempt{Channel: a.ch.Name, Status: record.StatusOK, HTTPStatus: a.resp.StatusCode,
		Role: winner.role, Outcome: record.OutcomeWon})
	a.stampBudget(&x.attempts[len(x.attempts)-1])
	x.setAttemptTiming(len(x.attempts)-1, winner.ti)
	x.tl.Relay(winner.ti)
	if a.authWait > 0 {
		// The winner's own wait only: racers wait side by side. (A
		// racer's t1 comes before its request is built, so the wait is
		// also inside its t2 − t1.)
		x.tl.AddPhase(timeline.PhaseUpstreamAuth, a.authWait)
	}
	return winner
}

// recordLoser records a racer cancelled because winner reached first
// output first, and tells its channel's health.
func (x *exchange) recordLoser(rc, winner *racer) {
	if rc.herr != nil && !errors.Is(context.Cause(rc.a.ctx), errHedgeLost) {
		// It had failed on its own before the cancel reached it.
		x.recordRacer(rc, rc.herr.Status, rc.herr.Msg, record.OutcomeFailed)
		x.observe(rc.h, rc.a, len(x.attempts)-1, false)
		return
	}
	x.recordRacer(rc, record.AttemptHedgeLost,
		"cancelled: the "+winner.role+" attempt on "+winner.a.ch.Name+" reached first output first", record.OutcomeCancelled)
	res := route.Result{Kind: route.KindCancelled, Stream: true}
	// Given as long as the winner needed, a loser without output is at
	// least that slow: its time so far is a fair lower bound. (A hedge
	// that started late and lost proves nothing of the kind.)
	wt := x.tl.Attempts()[winner.ti]
	if winnerNeeded := winner.outputAt().Sub(wt.Start); rc.cancelled.Sub(rc.t1) >= winnerNeeded {
		res = censored(rc.t1, rc.cancelled)
	}
	if m := x.tl.Attempts()[rc.ti]; !m.Headers.IsZero() {
		res.Headers, res.HasHeaders = m.Headers.Sub(m.Start), true
	}
	rc.h.Observe(res)
}

// outputAt is when the racer's first effective output arrived (or its
// last held piece when it had none).
func (rc *racer) outputAt() time.Time {
	for _, hp := range rc.held {
		if hp.res.Effective {
			return hp.at
		}
	}
	if n := len(rc.held); n > 0 {
		return rc.held[n-1].at
	}
	return rc.t1
}

// recordRacer appends the record attempt of a racer that did not win.
func (x *exchange) recordRacer(rc *racer, status, msg, outcome string) {
	at := record.Attempt{Channel: rc.a.ch.Name, Status: status, Error: msg, Role: rc.role, Outcome: outcome}
	if rc.a.resp != nil {
		at.HTTPStatus = rc.a.resp.StatusCode
	}
	rc.a.stampBudget(&at)
	if rc.st != nil {
		// Tokens the attempt consumed, when its usage came before it lost.
		if t := rc.st.Tokens(); t.Source == "usage" {
			if t.HasInput {
				at.TokensInput = record.Int(t.Input)
			}
			if t.HasOutput {
				at.TokensOutput = record.Int(t.Output)
			}
		}
	}
	if outcome == record.OutcomeFailed {
		x.g.log.Warn("upstream attempt failed", "request_id", x.rec.RequestID, "channel", rc.a.ch.Name,
			"role", rc.role, "status", status, "http_status", at.HTTPStatus, "err", rc.herr.Err)
	}
	x.attempts = append(x.attempts, at)
	x.setAttemptTiming(len(x.attempts)-1, rc.ti)
}

// runRacer runs one attempt up to its first output, on its own goroutine.
// It touches only rc, its attempt and read-only request state; its last
// send on events is its last action.
func (x *exchange) runRacer(rc *racer, events chan<- raceEvent) {
	a := rc.a
	fail := func(e *HTTPError) {
		rc.herr, rc.done = e, true
		events <- raceEvent{r: rc, kind: raceFailed}
	}
	req, err := x.upstreamRequest(a.ctx, a)
	if err != nil {
		fail(buildFailed(err))
		return
	}
	headerTimer := a.after(a.ch.Timeouts.Headers, errHeaderTimeout)
	resp, err := x.g.roundTrip(req)
	headerTimer.Stop()
	if err != nil {
		fail(x.classifyError(a, err, "connect"))
		return
	}
	a.resp = resp
	x.budgetSeen(a, resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		status := record.StatusUpstreamHTTPError
		if resp.StatusCode == http.StatusTooManyRequests {
			status = record.StatusRateLimited
		}
		e := &HTTPError{Code: resp.StatusCode, Type: "api_error", Msg: "upstream answered " + strconv.Itoa(resp.StatusCode), Status: status}
		if retryable(e) {
			resp.Body.Close()
		} else {
			rc.errBody = x.readErrorBody(a)
		}
		events <- raceEvent{r: rc, kind: raceHeaders, at: x.g.opts.Now()}
		fail(e)
		return
	}
	events <- raceEvent{r: rc, kind: raceHeaders, at: x.g.opts.Now()}
	if rc.rd = x.pieceReader(resp, rc.a.ch); rc.rd == nil {
		// Not an event stream: there is no t4 to race for; relay it.
		rc.done = true
		events <- raceEvent{r: rc, kind: raceOutput}
		return
	}
	held := 0
	rc.st = protocol.NewStream(x.ep.classify)
	for {
		p, err := rc.rd.Next()
		if err != nil {
			if err == io.EOF && slices.ContainsFunc(rc.held, func(hp heldPiece) bool { return hp.p.Kind == sse.PieceEvent }) {
				// A complete stream without effective output (metadata
				// only, or an in-stream error): it is the answer.
				rc.done = true
				events <- raceEvent{r: rc, kind: raceOutput}
				return
			}
			resp.Body.Close()
			if err == io.EOF {
				fail(&HTTPError{Code: http.StatusBadGateway, Type: "api_error", Msg: "upstream ended the stream before sending anything", Status: record.StatusUpstreamStreamError})
				return
			}
			fail(x.classifyError(a, err, "stream"))
			return
		}
		now := x.g.opts.Now()
		res := rc.st.Piece(p)
		hp := heldPiece{p: *p, at: now, res: res}
		hp.p.Raw = slices.Clone(p.Raw)
		hp.p.Event.Data, hp.p.Event.ID = nil, nil // not read by the relay; they alias the reader's buffer
		rc.held = append(rc.held, hp)
		held += len(hp.p.Raw)
		if res.Effective || held > maxHeld {
			if a.firstOutput != nil {
				a.firstOutput.Stop()
			}
			rc.done = true
			events <- raceEvent{r: rc, kind: raceOutput}
			return
		}
	}
}
