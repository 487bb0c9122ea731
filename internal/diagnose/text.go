package diagnose

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// barWidth is the width of the waterfall's bars in characters.
const barWidth = 40

// stage is one row of the waterfall: a span between two marks on the
// request's t0 origin.
type stage struct {
	name       string
	start, end timeline.Offset
	note       string
}

// WriteText prints rec as a readable waterfall (t0…t7, local phases,
// attempts), then the verdicts in order with their advice, then the
// context: what `ttfx diagnose` shows.
func WriteText(w io.Writer, rec record.Record, rep Report) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "request %s  %s  model %s  status %s", rec.RequestID, rec.API, orDash(rec.Model), rec.Status)
	if rec.HTTPStatus != 0 {
		fmt.Fprintf(ew, " (HTTP %d)", rec.HTTPStatus)
	}
	fmt.Fprintln(ew)
	fmt.Fprintf(ew, "  at %s  key %s  group %s  stream %v  channel %s (region %s, provider %s)  inflight gateway %d, channel %d\n",
		rec.Timestamp.UTC().Format(time.RFC3339), orDash(rec.KeyName), orDash(rec.Group), rec.Stream,
		orDash(rec.Channel), orDash(rec.Region), orDash(rec.Provider), rec.Inflight.Gateway, rec.Inflight.Channel)
	if rec.Error != "" {
		fmt.Fprintf(ew, "  error: %s\n", rec.Error)
	}
	writeRouting(ew, rec)
	fmt.Fprintln(ew)
	writeWaterfall(ew, rec)
	fmt.Fprintln(ew)
	writeVerdicts(ew, rep)
	fmt.Fprintln(ew)
	writeContext(ew, rep.Context)
	return ew.err
}

func writeWaterfall(w io.Writer, rec record.Record) {
	f := rec.Fields
	total, ok := f.TotalHandlerMs.Get()
	if !ok || total <= 0 {
		total = time.Millisecond
	}
	var stages []stage
	// Local phases: measured with their own origins; drawn from t0 in the
	// order they happen (auth, body read, distribution). The request's
	// wait before t0 is listed first, as it came first.
	if d, ok := f.RequestWaitMs.Get(); ok {
		stages = append(stages, stage{name: "request wait before t0 (local)", start: timeline.At(-d), end: timeline.At(0)})
	}
	at := time.Duration(0)
	for _, p := range []struct {
		name string
		s    timeline.Span
	}{{"auth", f.AuthMs}, {"body read", f.BodyReadMs}, {"distribution", f.DistributionMs}} {
		if d, ok := p.s.Get(); ok {
			stages = append(stages, stage{name: p.name + " (local)", start: timeline.At(at), end: timeline.At(at + d)})
			at += d
		}
	}
	for i, a := range rec.Attempts {
		end := a.UpstreamHeadersAtMs
		note := fmt.Sprintf("%s", a.Status)
		if a.HTTPStatus != 0 {
			note += fmt.Sprintf(" %d", a.HTTPStatus)
		}
		if hd, ok := a.UpstreamHeadersMs.Ms(); ok {
			note += fmt.Sprintf(", headers after %.1f ms", hd)
		} else {
			note += ", no headers"
		}
		if !end.Valid() {
			// A failed attempt without headers lasted until the next began.
			if i+1 < len(rec.Attempts) {
				end = rec.Attempts[i+1].UpstreamStartMs
			} else {
				end = f.UpstreamDoneMs
			}
		}
		stages = append(stages, stage{name: fmt.Sprintf("attempt %d %s", i+1, a.Channel), start: a.UpstreamStartMs, end: end, note: note})
	}
	last := f.UpstreamHeadersAtMs
	next := func(name string, m timeline.Offset) {
		if m.Valid() && last.Valid() {
			stages = append(stages, stage{name: name, start: last, end: m})
		}
		if m.Valid() {
			last = m
		}
	}
	next("headers → first event (t3)", f.FirstSSEEventMs)
	next("→ first response (t4)", f.FirstResponseMs)
	next("→ first text (t5)", f.FirstTextDeltaMs)
	next("generation → done (t6)", f.UpstreamDoneMs)
	next("→ handler done (t7)", f.TotalHandlerMs)
	// The longest silence between two content events, where it happened.
	if gap, ok := f.MaxOutputGapMs.Get(); ok {
		if end, ok := f.MaxOutputGapAtMs.Get(); ok {
			stages = append(stages, stage{name: "longest output gap", start: timeline.At(end - gap), end: f.MaxOutputGapAtMs, note: "no content between"})
		}
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "stage\tstart ms\tend ms\tms\t0%s%s\t\n", strings.Repeat(" ", barWidth-len(fmtDur(total))-1), fmtDur(total))
	for _, s := range stages {
		a, _ := s.start.Get()
		b, _ := s.end.Get()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.name, ms(s.start), ms(s.end), ms2(s.end.Sub(s.start)), bar(a, b, total), s.note)
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "marks (ms from t0; - = did not happen)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, m := range []struct {
		name string
		v    timeline.Offset
	}{
		{"t1 upstream start", f.UpstreamStartMs}, {"t2 upstream headers", f.UpstreamHeadersAtMs},
		{"t3 first SSE event", f.FirstSSEEventMs}, {"t4 first effective response", f.FirstResponseMs},
		{"t5 first visible text", f.FirstTextDeltaMs}, {"   first text sent to client", f.FirstTextSentMs},
		{"t6 upstream done", f.UpstreamDoneMs}, {"t7 handler done", f.TotalHandlerMs},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", m.name, ms(m.v))
	}
	tw.Flush()
	fmt.Fprintf(w, "  upstream_headers_ms %s (t2 − t1)   relay lag %s (first text sent − t5)\n", ms2(f.UpstreamHeadersMs), ms2(f.RelayLag()))
	if f.UpstreamAuthMs.Valid() {
		fmt.Fprintf(w, "  upstream_auth_ms %s (waiting for the channel's credentials on this request's path)\n", ms2(f.UpstreamAuthMs))
	}
	if rec.ProviderLatencyMs.Valid() {
		fmt.Fprintf(w, "  provider_latency_ms %s (the provider's own figure, its own origin: not a mark)\n", ms2(rec.ProviderLatencyMs))
	}
	t := rec.Tokens
	fmt.Fprintf(w, "  tokens: input %s, output %s, reasoning %s, visible %s (source %s)\n", count(t.Input), count(t.Output), count(t.Reasoning), count(t.Visible), orDash(t.Source))
	fmt.Fprintf(w, "  visible output %s tokens/s, inter-token latency %s ms\n", rec.VisibleOutputTPS, ms2(rec.InterTokenLatencyMs))
	fmt.Fprintf(w, "  longest output gap %s ms, ended at %s ms from t0\n", ms2(f.MaxOutputGapMs), ms(f.MaxOutputGapAtMs))
	e := rec.Events
	fmt.Fprintf(w, "  events: heartbeat %d, metadata %d, reasoning %d, tool %d, text %d, done %d, error %d, unknown %d; terminal %s, finish reason %s\n",
		e.Heartbeat, e.Metadata, e.Reasoning, e.Tool, e.Text, e.Done, e.Error, e.Unknown, orDash(rec.Terminal), orDash(rec.FinishReason))
}

func writeVerdicts(w io.Writer, rep Report) {
	if len(rep.Verdicts) == 0 {
		fmt.Fprintln(w, "verdict: none — every stage was within its threshold")
	} else {
		fmt.Fprintln(w, "verdicts (in the order checked; the first is the primary one)")
	}
	for i, v := range rep.Verdicts {
		tag := ""
		if v.Primary {
			tag = "  (primary)"
		}
		fmt.Fprintf(w, "  %d. %s%s\n", i+1, v.Label, tag)
		if v.Finding != nil {
			fmt.Fprintf(w, "     measured %.1f %s, rule %s\n", v.Finding.Value, v.Finding.Unit, v.Finding.Rule)
		}
		fmt.Fprintf(w, "     %s\n", v.Symptom)
		fmt.Fprintf(w, "     check: %s\n", v.Check)
		if v.NotHelp != "" {
			fmt.Fprintf(w, "     would not help: %s\n", v.NotHelp)
		}
	}
	var order []string
	for _, r := range rep.Rules {
		mark := " "
		if r.Fired {
			mark = "x"
		}
		item := fmt.Sprintf("[%s] %d %s", mark, r.Order, r.Label)
		if r.NotApplicable != "" {
			item = fmt.Sprintf("[-] %d %s: not applicable (%s)", r.Order, r.Label, r.NotApplicable)
		}
		order = append(order, item)
	}
	if len(order) > 0 {
		fmt.Fprintf(w, "  rules checked: %s\n", strings.Join(order, "  "))
	}
}

func writeContext(w io.Writer, c Context) {
	kind := "streaming"
	if !c.Stream {
		kind = "non-streaming"
	}
	fmt.Fprintf(w, "context: channel %s, model %s, %s requests only, %s – %s (UTC)\n", orDash(c.Channel), orDash(c.Model),
		kind, c.From.UTC().Format("15:04"), c.To.UTC().Format("15:04"))
	fmt.Fprintf(w, "  route %s, region %s, provider %s, inflight at receipt: gateway %d, channel %d\n",
		orDash(c.Route), orDash(c.Region), orDash(c.Provider), c.Inflight.Gateway, c.Inflight.Channel)
	switch c.Scope {
	case "channel":
		fmt.Fprintf(w, "  %d of %d other requests were flagged alike: the channel was slow then, not just this request\n", c.FlaggedAlike, c.Peers)
	case "request":
		fmt.Fprintf(w, "  %d of %d other requests were flagged alike: this request stands out; the channel was fine\n", c.FlaggedAlike, c.Peers)
	case "unknown":
		fmt.Fprintf(w, "  only %d other requests in the window: too few to tell a slow request from a slow channel\n", c.Peers)
	default:
		fmt.Fprintf(w, "  %d other requests in the window\n", c.Peers)
	}
	names := make([]string, 0, len(c.Fields))
	for n := range c.Fields {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return fieldOrder(names[i]) < fieldOrder(names[j]) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  field\tthis request\tp50\tp95\tn\t")
	for _, n := range names {
		fc := c.Fields[n]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%d\t\n", n, fptr(fc.Value), fptr(fc.P50), fptr(fc.P95), fc.Count)
	}
	tw.Flush()
	if c.PercentileMethod != "" {
		method, _, _ := strings.Cut(c.PercentileMethod, ":")
		fmt.Fprintf(w, "  percentiles: %s, over the channel and model in the window, this request included\n", method)
	}
}

func fieldOrder(name string) int {
	for i, f := range contextFields {
		if f == name {
			return i
		}
	}
	return len(contextFields)
}

// bar draws [a, b) of total on barWidth characters; a span too short to
// see still gets a thin mark so that it is not mistaken for absent.
func bar(a, b, total time.Duration) string {
	if b < a {
		return ""
	}
	from := int(math.Floor(float64(a) / float64(total) * barWidth))
	to := int(math.Ceil(float64(b) / float64(total) * barWidth))
	from, to = min(max(from, 0), barWidth-1), min(max(to, 0), barWidth)
	if to <= from {
		return strings.Repeat(" ", from) + "▏"
	}
	return strings.Repeat(" ", from) + strings.Repeat("█", to-from)
}

func ms(o timeline.Offset) string {
	v, ok := o.Ms()
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

func ms2(s timeline.Span) string {
	v, ok := s.Ms()
	if !ok {
		return "-"
	}
	if v < 1 {
		return fmt.Sprintf("%.3f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtDur(d time.Duration) string {
	if d >= time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond))
}

func fptr(v *float64) string {
	if v == nil {
		return "-"
	}
	if math.Abs(*v) < 1 {
		return fmt.Sprintf("%.3f", *v)
	}
	return fmt.Sprintf("%.1f", *v)
}

func count(p *int) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}
