package route

import (
	"fmt"
	"time"
)

// Outlier ejection, as Envoy does it (outlier_detection's consecutive_5xx
// and consecutive_gateway_failure, base_ejection_time × times ejected up to
// max_ejection_time): a channel whose attempts for a model fail
// consecutive_failures times in a row — connect errors, 5xx, header or
// first-output timeouts — is skipped for base × n (n = ejections in a row,
// up to max). When that passes, one request probes it: it is put first in
// that request's order, and its attempt readmits the channel or ejects it
// again for longer. Unlike Envoy's max_ejection_percent, the floor is
// absolute: a route whose channels are all ejected still tries the one
// whose ejection ends first (Router.Plan).

// Ejection is a channel's ejection state for one model, for views.
type Ejection struct {
	State string `json:"state"` // healthy | ejected | probing
	// Reason is why the last ejection happened: the consecutive failures
	// and how the last one ended ("5 consecutive failures, the last a
	// 5xx"); empty when never ejected.
	Reason      string        `json:"reason,omitempty"`
	Remaining   time.Duration `json:"-"` // until the probe may start; 0 unless ejected
	Ejections   uint64        `json:"ejections"`
	InARow      int           `json:"in_a_row"`             // the back-off multiplier of the last ejection
	Consecutive int           `json:"consecutive_failures"` // ejectable failures in a row now
}

// admit decides whether a plan made at now may use the channel, and
// whether this request is its probe.
func (h *Health) admit(now time.Duration) (ok, probe bool) {
	if !h.ejected.Load() {
		return true, false
	}
	if now < time.Duration(h.untilA.Load()) {
		// Ejected and not yet due: skipped without the lock, so that
		// the requests of an ejected channel do not queue on it.
		return false, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch h.state {
	case stateEjected:
		if now < h.until {
			return false, false
		}
		h.state, h.probeSince = stateProbing, now
		return true, true
	case stateProbing:
		// A probe whose request never reported (the client left before
		// the attempt started) is handed out again after a base period.
		if e := h.eject(); e != nil && now-h.probeSince >= e.Base {
			h.probeSince = now
			return true, true
		}
		return false, false
	}
	return true, false
}

// eject returns the route's ejection policy, or nil.
func (h *Health) eject() *EjectPolicy {
	if rt := h.route.Load(); rt != nil {
		return rt.Eject
	}
	return nil
}

// failure notes an ejectable failure at now.
func (h *Health) failure(now time.Duration, k Kind) {
	e := h.eject()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.failStreak.Add(1)
	if e == nil {
		return
	}
	switch {
	case h.state == stateProbing:
		h.reason = "the probe after an ejection failed: " + k.String()
		h.ejectLocked(now, e)
	case h.state == stateHealthy && int(n) >= e.ConsecutiveFailures:
		h.reason = fmt.Sprintf("%d consecutive failures, the last %s", n, k.String())
		h.ejectLocked(now, e)
	}
}

func (h *Health) ejectLocked(now time.Duration, e *EjectPolicy) {
	// A channel healthy for longer than max starts again from base (Envoy
	// lowers the multiplier while a host stays healthy).
	if h.state == stateHealthy && now-h.lastHealthy > e.Max {
		h.multiplier = 0
	}
	h.multiplier++
	h.state = stateEjected
	h.until = now + min(time.Duration(h.multiplier)*e.Base, e.Max)
	h.untilA.Store(int64(h.until))
	h.ejected.Store(true)
	h.ejections.Add(1)
	h.failStreak.Store(0)
	h.r.ejectionsTotal.Add(1)
}

// success notes an attempt that proved the channel alive.
func (h *Health) success(now time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failStreak.Store(0)
	if h.state == stateProbing {
		h.state = stateHealthy
		h.ejected.Store(false)
		h.lastHealthy = now
	}
}

// neutral notes an attempt that says nothing about the channel: a probe
// that ends this way is handed to the next request.
func (h *Health) neutral() {
	if !h.ejected.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == stateProbing {
		h.state, h.until = stateEjected, 0
		h.untilA.Store(0)
	}
}

// ejection returns the state for views, at now.
func (h *Health) ejection(now time.Duration) Ejection {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := Ejection{State: h.state.String(), Ejections: h.ejections.Load(), InARow: h.multiplier, Consecutive: int(h.failStreak.Load()), Reason: h.reason}
	if h.state == stateEjected && h.until > now {
		e.Remaining = h.until - now
	}
	return e
}

// Ejected reports whether the channel is skipped for this model now
// (ejected, or probing by another request).
func (h *Health) Ejected() bool {
	if !h.ejected.Load() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state != stateHealthy
}

// String says how an attempt ended, for an ejection's reason.
func (k Kind) String() string {
	switch k {
	case KindOK:
		return "an answer"
	case KindConnect:
		return "a connection error"
	case KindHTTP5xx:
		return "a 5xx status"
	case KindHTTP4xx:
		return "a 4xx status"
	case KindTimeout:
		return "a header or first-output timeout"
	case KindRateLimit:
		return "a 429"
	case KindCancelled:
		return "a cancelled attempt"
	case KindOtherTimeout:
		return "an idle or total timeout"
	case KindStreamError:
		return "a stream error"
	}
	return "an unknown outcome"
}

// uneject readmits the channel for this model at once, as an operator asks
// (Router.Uneject): the back-off starts again from its base. It reports
// whether the channel was ejected or probing.
func (h *Health) uneject(now time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	was := h.state != stateHealthy
	h.state, h.until, h.multiplier = stateHealthy, 0, 0
	h.untilA.Store(0)
	h.ejected.Store(false)
	h.failStreak.Store(0)
	h.lastHealthy = now
	return was
}
