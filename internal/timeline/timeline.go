// Package timeline holds the request timeline of SPEC.md §1: the marks t0…t7
// of one request on one monotonic clock, the attempts' own t1/t2, the local
// phases, and the fields derived from them.
//
// Marks are kept as time.Time values from one Clock (so they carry Go's
// monotonic reading) and converted to float milliseconds only at the JSON and
// SQL edge. A mark that did not happen is absent at the type level: Offset,
// Span and Rate each have a validity flag, and their zero value is absent.
package timeline

import "time"

// Clock returns the current time. Production code passes time.Now; tests
// pass a clock they step.
type Clock func() time.Time

// Mark names one milestone of a request.
type Mark uint8

const (
	T0 Mark = iota // gateway receives the request (origin)
	T1             // upstream request starts (of the relayed attempt)
	T2             // upstream response headers arrive (of the relayed attempt)
	T3             // first non-empty SSE event
	T4             // first effective content or action
	T5             // first visible text delta
	T6             // upstream body finished or closed, for any reason
	T7             // gateway handler finished: last byte written and flushed
	numMarks
)

var markNames = [numMarks]string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7"}

func (m Mark) String() string {
	if m < numMarks {
		return markNames[m]
	}
	return "t?"
}

// Phase names a local phase of the gateway.
type Phase uint8

const (
	PhaseAuth         Phase = iota // authentication
	PhaseDistribution              // channel selection and routing
	PhaseBodyRead                  // reading the client's request body
	// PhaseRequestWait is how long the request waited in the gateway
	// before t0: from its first byte read on the connection to the
	// handler starting (accepting, reading headers, scheduling).
	PhaseRequestWait
	// PhaseAdmissionWait is how long the request queued for a limit of
	// the gateway's admission (internal/admission), after t0.
	PhaseAdmissionWait
	// PhaseUpstreamAuth is how long the request waited for an upstream
	// credential fetched on its path (an OAuth2 token no cache held),
	// summed over its attempts; inside t1 − t0.
	PhaseUpstreamAuth
	numPhases
)

var phaseNames = [numPhases]string{"auth", "distribution", "body_read", "request_wait", "admission_wait", "upstream_auth"}

func (p Phase) String() string {
	if p < numPhases {
		return phaseNames[p]
	}
	return "phase?"
}

// Attempt is one upstream attempt's own marks.
type Attempt struct {
	Start   time.Time // t1: upstream request starts; zero if never started
	Headers time.Time // t2: upstream headers arrived; zero if they did not
}

// Timeline is the timeline of one request. It is owned by the goroutine that
// serves the request and is not safe for concurrent use.
type Timeline struct {
	now      Clock
	marks    [numMarks]time.Time // t1, t2 unused here: they live in attempts
	textSent time.Time           // first visible text flushed to the client
	headSent time.Time           // response headers flushed to the client
	// The content events of the relayed stream (text, reasoning or tool
	// arguments), for the longest silence between two of them.
	lastContent time.Time     // the latest; zero before t4
	maxGap      time.Duration // the longest gap between two consecutive ones
	maxGapAt    time.Time     // when that gap ended; zero with fewer than two
	phases      [numPhases]time.Duration
	phaseSet    [numPhases]bool
	attempts    []Attempt
	relayed     int // index in attempts of the relayed attempt, or -1
}

// New starts a timeline: t0 is taken now, before anything else is done.
func New(now Clock) *Timeline {
	if now == nil {
		now = time.Now
	}
	t := &Timeline{now: now, relayed: -1}
	t.marks[T0] = now()
	return t
}

// Now returns the timeline's clock reading.
func (t *Timeline) Now() time.Time { return t.now() }

// Start returns t0.
func (t *Timeline) Start() time.Time { return t.marks[T0] }

// Mark records m now, unless it was recorded before: every mark keeps its
// first occurrence. It reports whether it recorded the mark. T1 and T2
// belong to attempts; use BeginAttempt and GotHeaders.
func (t *Timeline) Mark(m Mark) bool { return t.MarkAt(m, t.now()) }

// MarkAt records m at the given time, unless it was recorded before.
func (t *Timeline) MarkAt(m Mark, at time.Time) bool {
	if m <= T2 || m >= numMarks || !t.marks[m].IsZero() {
		return false
	}
	t.marks[m] = at
	return true
}

// Has reports whether m was recorded.
func (t *Timeline) Has(m Mark) bool { return t.Since(m).Valid() }

// ForgetStream clears t3…t6 and the first-text-sent mark: the request
// moves on to another attempt, and its request-level marks must come from
// the attempt that is relayed (SPEC.md §1).
func (t *Timeline) ForgetStream() {
	for m := T3; m <= T6; m++ {
		t.marks[m] = time.Time{}
	}
	t.textSent = time.Time{}
	t.lastContent, t.maxGap, t.maxGapAt = time.Time{}, 0, time.Time{}
}

// Content notes an event carrying content (text, reasoning or tool
// arguments) that arrived at at, for max_output_gap_ms: the longest wait
// between two consecutive content events, from t4 on. Heartbeats and
// metadata are not content, so a provider that pings while stalled still
// shows the stall. Events must be noted in arrival order.
func (t *Timeline) Content(at time.Time) {
	if !t.lastContent.IsZero() {
		if gap := at.Sub(t.lastContent); t.maxGapAt.IsZero() || gap > t.maxGap {
			t.maxGap, t.maxGapAt = gap, at
		}
	}
	t.lastContent = at
}

// MarkHeadersSent records when the response headers were flushed to the
// client (headers_sent_ms), unless it was recorded before.
func (t *Timeline) MarkHeadersSent() {
	if t.headSent.IsZero() {
		t.headSent = t.now()
	}
}

// MarkTextSent records when the first visible text was flushed to the
// client (first_text_sent_ms), unless it was recorded before.
func (t *Timeline) MarkTextSent() {
	if t.textSent.IsZero() {
		t.textSent = t.now()
	}
}

// SetPhase records the duration of a local phase.
func (t *Timeline) SetPhase(p Phase, d time.Duration) {
	if p < numPhases {
		t.phases[p], t.phaseSet[p] = d, true
	}
}

// AddPhase adds d to a local phase (one that may happen once per attempt),
// recording it.
func (t *Timeline) AddPhase(p Phase, d time.Duration) {
	if p < numPhases {
		t.phases[p] += d
		t.phaseSet[p] = true
	}
}

// PhaseSince records a local phase that started at start and ends now, and
// returns the time it ended.
func (t *Timeline) PhaseSince(p Phase, start time.Time) time.Time {
	end := t.now()
	t.SetPhase(p, end.Sub(start))
	return end
}

// BeginAttempt records t1 of a new attempt now and returns its index.
func (t *Timeline) BeginAttempt() int {
	t.attempts = append(t.attempts, Attempt{Start: t.now()})
	return len(t.attempts) - 1
}

// GotHeaders records t2 of attempt i now.
func (t *Timeline) GotHeaders(i int) {
	if i >= 0 && i < len(t.attempts) && t.attempts[i].Headers.IsZero() {
		t.attempts[i].Headers = t.now()
	}
}

// GotHeadersAt records t2 of attempt i at the given time (an attempt run on
// another goroutine reports when its headers came).
func (t *Timeline) GotHeadersAt(i int, at time.Time) {
	if i >= 0 && i < len(t.attempts) && t.attempts[i].Headers.IsZero() {
		t.attempts[i].Headers = at
	}
}

// Relay makes attempt i the relayed one: the request-level t1 and t2 are
// its marks.
func (t *Timeline) Relay(i int) {
	if i >= 0 && i < len(t.attempts) {
		t.relayed = i
	}
}

// Attempts returns the attempts' marks in order.
func (t *Timeline) Attempts() []Attempt { return t.attempts }

// AttemptTiming is an attempt's marks as fields: upstream_start_ms is t1 − t0
// of the request, upstream_headers_ms is t2 − t1 of this attempt.
type AttemptTiming struct {
	UpstreamStartMs     Offset `json:"upstream_start_ms"`
	UpstreamHeadersMs   Span   `json:"upstream_headers_ms"`
	UpstreamHeadersAtMs Offset `json:"upstream_headers_at_ms"`
}

// AttemptTiming returns the timing fields of attempt i.
func (t *Timeline) AttemptTiming(i int) AttemptTiming {
	if i < 0 || i >= len(t.attempts) {
		return AttemptTiming{}
	}
	a := t.attempts[i]
	start, headers := t.offset(a.Start), t.offset(a.Headers)
	return AttemptTiming{UpstreamStartMs: start, UpstreamHeadersMs: headers.Sub(start), UpstreamHeadersAtMs: headers}
}

// Since returns mark m as an offset from t0, absent if it did not happen.
// T1 and T2 are those of the relayed attempt.
func (t *Timeline) Since(m Mark) Offset {
	switch {
	case m == T1 || m == T2:
		if t.relayed < 0 {
			return Offset{}
		}
		a := t.attempts[t.relayed]
		if m == T1 {
			return t.offset(a.Start)
		}
		return t.offset(a.Headers)
	case m < numMarks:
		return t.offset(t.marks[m])
	}
	return Offset{}
}

func (t *Timeline) offset(at time.Time) Offset {
	if at.IsZero() {
		return Offset{}
	}
	return At(at.Sub(t.marks[T0]))
}

// Phase returns the duration of a local phase, absent if it was not recorded.
func (t *Timeline) Phase(p Phase) Span {
	if p >= numPhases || !t.phaseSet[p] {
		return Span{}
	}
	return SpanOf(t.phases[p])
}

// Fields are the timing fields of SPEC.md §1, under their contract names.
// Offsets are from t0; UpstreamHeadersMs and the local phases are Spans with
// their own origins.
type Fields struct {
	AuthMs            Span `json:"auth_ms"`
	DistributionMs    Span `json:"distribution_ms"`
	BodyReadMs        Span `json:"body_read_ms"`
	UpstreamHeadersMs Span `json:"upstream_headers_ms"` // t2 − t1 of the relayed attempt

	UpstreamStartMs     Offset `json:"upstream_start_ms"`      // t1 − t0
	UpstreamHeadersAtMs Offset `json:"upstream_headers_at_ms"` // t2 − t0
	FirstSSEEventMs     Offset `json:"first_sse_event_ms"`     // t3 − t0
	FirstResponseMs     Offset `json:"first_response_ms"`      // t4 − t0
	FirstTextDeltaMs    Offset `json:"first_text_delta_ms"`    // t5 − t0
	FirstTextSentMs     Offset `json:"first_text_sent_ms"`     // first visible text flushed to the client − t0
	UpstreamDoneMs      Offset `json:"upstream_done_ms"`       // t6 − t0
	TotalHandlerMs      Offset `json:"total_handler_ms"`       // t7 − t0

	// RequestWaitMs is how long the request waited in the gateway before
	// t0 (a local phase, its own origin; absent where not measured).
	RequestWaitMs Span `json:"request_wait_ms"`
	// AdmissionWaitMs is how long the request queued for a limit of the
	// gateway (limits with a queue), between authentication and routing;
	// absent when it did not queue.
	AdmissionWaitMs Span `json:"admission_wait_ms,omitzero"`
	// UpstreamAuthMs is how long the request waited for an upstream
	// credential fetched on its path (SPEC §1); absent when the
	// credentials were cached or static.
	UpstreamAuthMs Span `json:"upstream_auth_ms,omitzero"`
	// HeadersSentMs is when the response headers were flushed to the
	// client, from t0; absent when none were sent.
	HeadersSentMs Offset `json:"headers_sent_ms"`
	// MaxOutputGapMs is the longest wait between two consecutive content
	// events from t4 on (its own origin); absent with fewer than two.
	// MaxOutputGapAtMs is when that gap ended, from t0.
	MaxOutputGapMs   Span   `json:"max_output_gap_ms"`
	MaxOutputGapAtMs Offset `json:"max_output_gap_at_ms"`
}

// Fields derives the §1 fields from the marks.
func (t *Timeline) Fields() Fields {
	return Fields{
		AuthMs:              t.Phase(PhaseAuth),
		DistributionMs:      t.Phase(PhaseDistribution),
		BodyReadMs:          t.Phase(PhaseBodyRead),
		UpstreamHeadersMs:   t.Since(T2).Sub(t.Since(T1)),
		UpstreamStartMs:     t.Since(T1),
		UpstreamHeadersAtMs: t.Since(T2),
		FirstSSEEventMs:     t.Since(T3),
		FirstResponseMs:     t.Since(T4),
		FirstTextDeltaMs:    t.Since(T5),
		FirstTextSentMs:     t.offset(t.textSent),
		UpstreamDoneMs:      t.Since(T6),
		TotalHandlerMs:      t.Since(T7),
		RequestWaitMs:       t.Phase(PhaseRequestWait),
		AdmissionWaitMs:     t.Phase(PhaseAdmissionWait),
		UpstreamAuthMs:      t.Phase(PhaseUpstreamAuth),
		HeadersSentMs:       t.offset(t.headSent),
		MaxOutputGapMs:      t.maxGapSpan(),
		MaxOutputGapAtMs:    t.offset(t.maxGapAt),
	}
}

func (t *Timeline) maxGapSpan() Span {
	if t.maxGapAt.IsZero() {
		return Span{}
	}
	return SpanOf(t.maxGap)
}

// LocalMs returns the sum of the local phases (request wait + auth +
// distribution + body read), absent when none was recorded. The request
// wait is before t0, so an overloaded gateway counts as local overhead.
func (f Fields) LocalMs() Span {
	return f.RequestWaitMs.Add(f.AuthMs).Add(f.DistributionMs).Add(f.BodyReadMs)
}

// RelayLag returns first_text_sent − first_text_delta: how long the gateway
// held the first visible text before the client had it.
func (f Fields) RelayLag() Span { return f.FirstTextSentMs.Sub(f.FirstTextDeltaMs) }

// Speed computes the visible generation speed of SPEC.md §3 from the first
// visible text and the final response time (both from t0) and the visible
// output tokens: tokens per second over the visible window, and the
// inter-token latency window / (tokens − 1). Both are absent when there was
// no visible text, fewer than 2 visible tokens, or an empty window.
func Speed(firstText, final Offset, visibleTokens int) (tps Rate, itl Span) {
	window, ok := final.Sub(firstText).Get()
	if !ok || visibleTokens < 2 || window <= 0 {
		return Rate{}, Span{}
	}
	tps = RateOf(float64(visibleTokens) / window.Seconds())
	itl = SpanOf(window / time.Duration(visibleTokens-1))
	return tps, itl
}
