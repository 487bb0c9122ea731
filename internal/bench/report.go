package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteReport prints a result's summary as text tables: the conditions
// in one paragraph, the counts, throughput and load, then per metric the
// successful requests, the failure-inclusive latencies, the failed
// requests, and the gateway split when there is one.
func WriteReport(w io.Writer, res *Result) error {
	c, s := &res.Conditions, &res.Summary
	rq := s.Requests
	var b strings.Builder
	// Nothing succeeded: why comes first, and the tables of successful
	// requests (empty) do not come at all.
	allFailed := rq.Measured > 0 && rq.OK == 0 && rq.Failed > 0
	if allFailed {
		fmt.Fprintf(&b, "every measured request failed (%d of %d):\n", rq.Failed, rq.Measured)
		for _, fc := range FailureClasses(res.Requests) {
			fmt.Fprintf(&b, "  %s × %d", fc.Class, fc.Count)
			if e := firstError(res.Requests, fc.Class); e != "" {
				fmt.Fprintf(&b, ": %s", e)
			}
			b.WriteString("\n")
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "ttfx bench %s — run %s", c.Tool.Version, res.Run.ID)
	if res.Run.Host != "" {
		fmt.Fprintf(&b, " on %s", res.Run.Host)
	}
	if !res.Run.Started.IsZero() {
		fmt.Fprintf(&b, ", %s", res.Run.Started.Format(time.RFC3339))
	}
	if res.Run.Interrupted {
		b.WriteString(" (INTERRUPTED: the sample is incomplete)")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "%s %s, model %s, stream=%v\n", c.API, c.URL+" "+c.Route, c.Model, c.Stream)
	fmt.Fprintf(&b, "conditions: %s\n", ConditionsLine(c))
	if len(res.Run.Sources) > 0 {
		fmt.Fprintf(&b, "merged from %d runs:", len(res.Run.Sources))
		for _, src := range res.Run.Sources {
			fmt.Fprintf(&b, " %s@%s (%d)", src.ID, src.Host, src.Requests)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "\nrequests: %d measured, %d ok, %d failed (error rate %.1f%%), %d cancelled; warmup %d (%d ok)\n",
		rq.Measured, rq.OK, rq.Failed, 100*rq.ErrorRate, rq.Cancelled, res.Warmup.Requests, res.Warmup.OK)
	if len(rq.Statuses) > 0 {
		fmt.Fprintf(&b, "  statuses: %s\n", countsLine(rq.Statuses))
	}
	if len(rq.Phases) > 0 {
		fmt.Fprintf(&b, "  failures by phase: %s\n", countsLine(rq.Phases))
	}
	if classes := FailureClasses(res.Requests); len(classes) > 0 {
		var parts []string
		for _, c := range classes {
			parts = append(parts, fmt.Sprintf("%s × %d", c.Class, c.Count))
		}
		fmt.Fprintf(&b, "  failures: %s\n", strings.Join(parts, ", "))
	}
	win, _ := s.Window.DurationMs.Get()
	t := s.Throughput
	fmt.Fprintf(&b, "window %s: %.2f req/s (%.2f ok), aggregate output %.1f tok/s (visible %.1f tok/s)",
		win.Round(time.Millisecond), t.RequestsPerS, t.OKRequestsPerS, t.OutputTokensPerS, t.VisibleTokensPerS)
	if t.RowsWithoutOutput > 0 {
		fmt.Fprintf(&b, "; %d rows without a usage output count", t.RowsWithoutOutput)
	}
	b.WriteString("\n")
	l := s.Load
	fmt.Fprintf(&b, "load: %s", l.Mode)
	if l.RequestedRate != nil {
		fmt.Fprintf(&b, ", requested %.3g req/s", *l.RequestedRate)
	}
	if l.RequestedConcurrency != nil {
		fmt.Fprintf(&b, ", requested concurrency %d", *l.RequestedConcurrency)
	}
	if l.AchievedRate != nil {
		fmt.Fprintf(&b, ", achieved %.3g req/s started", *l.AchievedRate)
	}
	if l.AchievedConcurrency != nil {
		fmt.Fprintf(&b, ", mean in flight %.2f", *l.AchievedConcurrency)
	}
	fmt.Fprintf(&b, "; bench scheduling lag p50 %s p99 %s max %s ms\n", fmtV(l.SchedLagMs.P50), fmtV(l.SchedLagMs.P99), fmtV(l.SchedLagMs.Max))
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := "metric\tcount\tabsent\tmin\tp50\tp90\tp95\tp99\tmax\tmean\t"
	line := func(name string, st Stat, extra string) {
		fmt.Fprintf(tw, "%s\t%d\t%d%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", name, st.Count, st.Absent, extra,
			fmtV(st.Min), fmtV(st.P50), fmtV(st.P90), fmtV(st.P95), fmtV(st.P99), fmtV(st.Max), fmtV(st.Mean))
	}
	if !allFailed {
		fmt.Fprintf(w, "\nsuccessful requests (%d) — ms, tps in visible tokens/s per request\n", rq.OK)
		fmt.Fprintln(tw, header)
		for _, m := range Metrics {
			line(m.Name, *s.Metric(m.Name), "")
		}
		tw.Flush()
	}

	// Counting failures as +Inf changes nothing when none failed, and
	// says nothing new when all did.
	if rq.Failed > 0 && !allFailed {
		fmt.Fprintf(w, "\nwith failures counted as +Inf (%d ok + %d failed)\n", rq.OK, rq.Failed)
		fmt.Fprintln(tw, "metric\tcount\tabsent/unbounded\tmin\tp50\tp90\tp95\tp99\tmax\tmean\t")
		for _, m := range Metrics {
			if st, ok := s.WithFailures[m.Name]; ok {
				fmt.Fprintf(tw, "%s\t%d\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", m.Name, st.Count, st.Absent, st.Unbounded,
					fmtV(st.Min), fmtV(st.P50), fmtV(st.P90), fmtV(st.P95), fmtV(st.P99), fmtV(st.Max), fmtV(st.Mean))
			}
		}
		tw.Flush()
	}

	if rq.Failed > 0 {
		fmt.Fprintf(w, "\nfailed requests (%d) — how far they got\n", rq.Failed)
		fmt.Fprintln(tw, header)
		for _, m := range Metrics {
			line(m.Name, s.Failures[m.Name], "")
		}
		tw.Flush()
	}

	if allFailed {
		return nil
	}
	fmt.Fprintf(w, "\ntokens (successful requests)\n")
	fmt.Fprintln(tw, header)
	line("prompt (o200k_base)", s.Tokens.Prompt, "")
	line("input (usage)", s.Tokens.Input, "")
	line("visible output", s.Tokens.Visible, "")
	tw.Flush()

	if len(s.GatewaySplit) > 0 {
		fmt.Fprintf(w, "\ngateway split (successful joined requests) — ms; the three parts add up to the client's value\n")
		fmt.Fprintln(tw, "metric\tpart\tcount\tabsent\tp50\tp95\tp99\tmean\t")
		for _, m := range []string{MetricFirstEvent, MetricFirstResponse, MetricFirstText, MetricEndToEnd} {
			parts, ok := s.GatewaySplit[m]
			if !ok {
				continue
			}
			for i, part := range splitParts {
				st := parts[part]
				name := m
				if i > 0 {
					name = ""
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", name, part, st.Count, st.Absent, fmtV(st.P50), fmtV(st.P95), fmtV(st.P99), fmtV(st.Mean))
			}
		}
		tw.Flush()
	}
	_, err := fmt.Fprintf(w, "\npercentile method: %s\n", s.PercentileMethod)
	return err
}

// FailureClass is one kind of failure of a run and how often it happened.
type FailureClass struct {
	Class string // "401 invalid_api_key": the HTTP status and the provider's error code (or the bench's status)
	Count int
}

// firstError is the error of the first failed row of class, bounded.
func firstError(rows []Row, class string) string {
	for _, c := range rows {
		if !c.failed() {
			continue
		}
		if only := FailureClasses([]Row{c}); len(only) == 1 && only[0].Class == class {
			if r := []rune(c.Error); len(r) > 200 {
				return string(r[:200]) + "…"
			}
			return c.Error
		}
	}
	return ""
}

// FailureClasses groups the failed rows by HTTP status and error code, most
// frequent first: what failed, in the words the endpoint used, which the
// counts per status and phase alone do not say.
func FailureClasses(rows []Row) []FailureClass {
	counts := map[string]int{}
	for i := range rows {
		r := &rows[i]
		if !r.failed() {
			continue
		}
		code := r.ErrorCode
		if code == "" {
			code = r.Status
		}
		class := code
		if r.HTTPStatus != 0 {
			class = strconv.Itoa(r.HTTPStatus) + " " + code
		} else if r.ErrorCode != "" {
			class = r.Status + " " + code
		}
		counts[class]++
	}
	out := make([]FailureClass, 0, len(counts))
	for c, n := range counts {
		out = append(out, FailureClass{c, n})
	}
	slices.SortFunc(out, func(a, b FailureClass) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Class, b.Class)
	})
	return out
}

// ConditionsLine gives the speed-relevant conditions in one line.
func ConditionsLine(c *Conditions) string {
	var parts []string
	switch c.Load.Mode {
	case ModeRate:
		parts = append(parts, fmt.Sprintf("rate %g/s %s", c.Load.Rate, c.Load.Arrival))
	default:
		parts = append(parts, fmt.Sprintf("concurrency %d", c.Load.Concurrency))
	}
	if c.Machines > 1 {
		parts = append(parts, fmt.Sprintf("× %d machines", c.Machines))
	}
	if c.Sample.Requests > 0 {
		parts = append(parts, fmt.Sprintf("%d requests", c.Sample.Requests))
	} else if d, ok := c.Sample.Duration.Get(); ok {
		parts = append(parts, "for "+d.String())
	}
	parts = append(parts, fmt.Sprintf("warmup %d", c.Sample.Warmup))
	parts = append(parts, fmt.Sprintf("input %g±%g tokens", c.Prompt.InputTokensMean, c.Prompt.InputTokensSD))
	if c.MaxTokens > 0 {
		parts = append(parts, fmt.Sprintf("max_tokens %d", c.MaxTokens))
	}
	if c.ReasoningEffort != "" {
		parts = append(parts, "reasoning "+c.ReasoningEffort)
	}
	if c.Tools != nil {
		parts = append(parts, fmt.Sprintf("%d tools", c.Tools.Count))
	}
	if s := c.Sampling; s.Temperature != nil || s.TopP != nil || s.Seed != nil {
		var sp []string
		if s.Temperature != nil {
			sp = append(sp, "temperature "+strconv.FormatFloat(*s.Temperature, 'g', -1, 64))
		}
		if s.TopP != nil {
			sp = append(sp, "top_p "+strconv.FormatFloat(*s.TopP, 'g', -1, 64))
		}
		if s.Seed != nil {
			sp = append(sp, "seed "+strconv.FormatInt(*s.Seed, 10))
		}
		parts = append(parts, strings.Join(sp, " "))
	}
	if d, ok := c.Timeout.Get(); ok {
		parts = append(parts, "timeout "+d.String())
	}
	if c.Retry.Max > 0 {
		parts = append(parts, fmt.Sprintf("retries %d on %s", c.Retry.Max, strings.Join(c.Retry.On, ",")))
	} else {
		parts = append(parts, "no retries")
	}
	for _, k := range slices.Sorted(maps.Keys(c.Labels)) {
		parts = append(parts, k+"="+c.Labels[k])
	}
	return strings.Join(parts, ", ")
}

func countsLine(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range keys {
		name := k
		if name == "" {
			name = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, m[k]))
	}
	return strings.Join(parts, ", ")
}

// fmtV formats a statistic with one decimal ("-" when absent, "+Inf").
func fmtV(v *Value) string {
	if v == nil {
		return "-"
	}
	return v.String()
}
