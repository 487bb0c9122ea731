package sim

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/timeline"
)

// StepKind is what one moment of a simulated stream does, independent of
// the protocol it is written in.
type StepKind uint8

const (
	StepStart     StepKind = iota + 1 // the first metadata event(s)
	StepReasoning                     // a reasoning delta
	StepToolStart                     // the tool call's header (id, name, empty arguments)
	StepTool                          // a tool-call argument delta
	StepText                          // a visible text delta
	StepHeartbeat                     // a keep-alive
	StepFinish                        // finish reason, usage and terminal marker
	StepError                         // fault: an in-stream error event, then a clean close
	StepCut                           // fault: the connection is cut
	StepClose                         // fault: a clean close without terminal marker
)

// step is one moment of a plan. Steps of one plan are in time order.
type step struct {
	at     time.Duration // due time, from the request's receipt
	kind   StepKind
	text   string // the delta's text (reasoning, tool arguments, visible text)
	tokens int    // tokens the delta carries
	last   bool   // the last delta of its part: the encoder closes the part after it
}

// plan is the schedule of one simulated response.
type plan struct {
	headers    time.Duration
	steps      []step
	end        time.Duration // when the last step is due
	contentEnd time.Duration // when the last content is done, before EndMs and faults
	fault      fault
}

func msDur(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// buildPlan lays out the steps of p with the content c. It does not look at
// the protocol: each encoder writes the same moments in its own format.
func buildPlan(p Profile, ft fault, c *content) plan {
	pl := plan{headers: msDur(p.HeadersMs), fault: ft}
	first := msDur(p.firstEventMs())
	pl.steps = append(pl.steps, step{at: first, kind: StepStart})

	type part struct {
		kind   StepKind
		start  time.Duration
		pieces []string
	}
	var parts []part
	if p.ReasoningMs != nil && len(c.reasoning) > 0 {
		parts = append(parts, part{StepReasoning, msDur(*p.ReasoningMs), c.reasoning})
	}
	if p.ToolMs != nil {
		parts = append(parts, part{StepTool, msDur(*p.ToolMs), c.toolParts})
	}
	if p.TextMs != nil && len(c.text) > 0 {
		parts = append(parts, part{StepText, msDur(*p.TextMs), c.text})
	}
	// Parts run in the order of their start times (reasoning, tool, text
	// when equal); a stream with text before its tool call is as real as
	// the other order (see the OpenAI fixture text-then-tool-call).
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].start < parts[j].start })

	k := p.tokensPerEvent()
	end := first
	visible := 0 // visible tokens laid out so far
	cutAt := -1  // index in steps of the first step at or after the fault's token
	nBased := ft.kind == faultReset || ft.kind == faultStall || ft.kind == faultErrorEvent
	for i, pt := range parts {
		n := len(pt.pieces)
		// Token j of a part is due at start + j/rate. The last part keeps
		// the profile's rate, so a client measuring text over
		// (last byte − first text) sees exactly tps; an earlier part is
		// sped up when it would run into the next one.
		rate := p.TPS
		if i+1 < len(parts) {
			window := parts[i+1].start - pt.start
			if window <= 0 {
				rate = math.Inf(1)
			} else if need := float64(n) / window.Seconds(); need > rate {
				rate = need
			}
		}
		at := func(j int) time.Duration {
			if math.IsInf(rate, 1) || j == 0 {
				return pt.start
			}
			return pt.start + time.Duration(math.Round(float64(j)/rate*float64(time.Second)))
		}
		if pt.kind == StepTool {
			pl.steps = append(pl.steps, step{at: pt.start, kind: StepToolStart})
		}
		for j := 0; j < n; {
			m := min(k, n-j)
			if pt.kind == StepText && nBased {
				if visible < ft.after && ft.after < visible+m {
					m = ft.after - visible // split the event so that exactly N tokens go out
				}
				if visible == ft.after && cutAt < 0 {
					cutAt = len(pl.steps)
				}
			}
			pl.steps = append(pl.steps, step{at: at(j), kind: pt.kind, text: strings.Join(pt.pieces[j:j+m], ""), tokens: m, last: j+m == n})
			if pt.kind == StepText {
				visible += m
			}
			j += m
		}
		end = max(end, at(n))
	}
	pl.contentEnd = end
	if p.EndMs != nil {
		end = max(end, msDur(*p.EndMs))
	}
	pl.steps = append(pl.steps, step{at: end, kind: StepFinish})
	if nBased && cutAt < 0 {
		cutAt = len(pl.steps) - 1 // N is all the visible text: the fault takes the finish's place
	}

	switch ft.kind {
	case faultReset, faultErrorEvent:
		kind := StepCut
		if ft.kind == faultErrorEvent {
			kind = StepError
		}
		at := pl.steps[cutAt].at
		pl.steps = append(pl.steps[:cutAt], step{at: at, kind: kind})
		end = at
	case faultStall:
		for i := cutAt; i < len(pl.steps); i++ {
			pl.steps[i].at += ft.stall
		}
		end += ft.stall
	case faultTruncate:
		pl.steps[len(pl.steps)-1].kind = StepClose
	}
	pl.end = end

	if p.HeartbeatEveryMs > 0 {
		every := msDur(p.HeartbeatEveryMs)
		var beats []step
		for t := pl.headers + every; t < end; t += every {
			beats = append(beats, step{at: t, kind: StepHeartbeat})
		}
		pl.steps = mergeSteps(pl.steps, beats)
	}
	return pl
}

// mergeSteps merges beats into steps by time; a beat due at the same time
// as a step goes after it.
func mergeSteps(steps, beats []step) []step {
	out := make([]step, 0, len(steps)+len(beats))
	i, j := 0, 0
	for i < len(steps) || j < len(beats) {
		if j == len(beats) || (i < len(steps) && steps[i].at <= beats[j].at) {
			out = append(out, steps[i])
			i++
		} else {
			out = append(out, beats[j])
			j++
		}
	}
	return out
}

// jitter returns a copy of pl with each time delayed by a random 0…j,
// keeping the order of steps.
func (pl plan) jitter(j time.Duration, rng *rand.Rand) plan {
	if j <= 0 {
		return pl
	}
	d := func() time.Duration { return time.Duration(rng.Int64N(int64(j) + 1)) }
	out := pl
	out.headers += d()
	out.steps = make([]step, len(pl.steps))
	prev := out.headers
	for i, st := range pl.steps {
		st.at = max(st.at+d(), prev)
		prev = st.at
		out.steps[i] = st
	}
	if n := len(out.steps); n > 0 {
		out.end = out.steps[n-1].at
	}
	return out
}

// Schedule is when a profile's stream sends each milestone of SPEC.md §1,
// as the streaming APIs send them (an API without reasoning or tool calls,
// such as legacy completions, carries only the text), without jitter.
// Tests use it to know what a client should measure without waiting.
type Schedule struct {
	Headers       time.Duration    // response headers
	FirstEvent    timeline.Offset  // first event with data (t3)
	FirstResponse timeline.Offset  // first reasoning, tool-argument or text delta (t4)
	FirstText     timeline.Offset  // first visible text (t5)
	End           timeline.Offset  // last byte: terminal events, or where a fault ends the stream
	Visible       int              // visible tokens sent
	Reasoning     int              // reasoning tokens (streamed or hidden) reported in a complete response
	Tool          int              // tool-call argument tokens
	TPS           timeline.Rate    // Visible / (End − FirstText), absent as SPEC.md §3 says
	Heartbeats    int              // keep-alives sent
	Fault         string           // the profile's fault, as written
	StatusOnly    bool             // the fault is status:CODE: no stream at all
	Steps         []ScheduledEvent // every moment in order
}

// ScheduledEvent is one moment of a Schedule.
type ScheduledEvent struct {
	At     time.Duration
	Kind   string // start, reasoning, tool_start, tool, text, heartbeat, finish, error, cut, close
	Tokens int
}

var stepNames = [...]string{"", "start", "reasoning", "tool_start", "tool", "text", "heartbeat", "finish", "error", "cut", "close"}

func (k StepKind) String() string { return stepNames[k] }

// Schedule computes p's schedule. It fails when p is not valid.
func (p Profile) Schedule() (Schedule, error) {
	if err := p.Validate(); err != nil {
		return Schedule{}, err
	}
	ft, _ := parseFault(p.Fault)
	s := Schedule{Headers: msDur(p.HeadersMs), Fault: p.Fault}
	if ft.kind == faultStatus {
		s.StatusOnly = true
		return s, nil
	}
	if p.recording != nil {
		return Schedule{}, errReplaySchedule
	}
	c := generate(p)
	pl := buildPlan(p, ft, c)
	s.Headers = pl.headers
	s.Reasoning, s.Tool = c.reasoningTokens, c.toolTokens
	for _, st := range pl.steps {
		s.Steps = append(s.Steps, ScheduledEvent{At: st.at, Kind: st.kind.String(), Tokens: st.tokens})
		switch st.kind {
		case StepHeartbeat:
			s.Heartbeats++
			continue
		case StepCut, StepClose:
			continue
		}
		if !s.FirstEvent.Valid() {
			s.FirstEvent = timeline.At(st.at)
		}
		switch st.kind {
		case StepReasoning, StepTool, StepText:
			if !s.FirstResponse.Valid() {
				s.FirstResponse = timeline.At(st.at)
			}
		}
		if st.kind == StepText {
			if !s.FirstText.Valid() {
				s.FirstText = timeline.At(st.at)
			}
			s.Visible += st.tokens
		}
	}
	s.End = timeline.At(pl.end)
	s.TPS, _ = timeline.Speed(s.FirstText, s.End, s.Visible)
	return s, nil
}
