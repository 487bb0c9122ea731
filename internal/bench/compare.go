package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Comparison is a side-by-side view of runs, the first one the baseline.
type Comparison struct {
	Names []string  // how each run is called in the table (its file name)
	Runs  []*Result // in the order given
	// Differences[i] are run i's conditions against the baseline's
	// (Differences[0] is empty).
	Differences [][]Difference
}

// Compare lines up runs against the first.
func Compare(names []string, runs []*Result) *Comparison {
	c := &Comparison{Names: names, Runs: runs, Differences: make([][]Difference, len(runs))}
	for i := 1; i < len(runs); i++ {
		c.Differences[i] = Differences(runs[0].Conditions, runs[i].Conditions)
	}
	return c
}

// loadAxes are the conditions a load sweep varies, with the unit of each:
// runs that differ in one of them and in nothing else that affects speed
// are one setup measured under several loads — a series, not a ranking.
var loadAxes = []struct{ field, name, unit string }{
	{"load.concurrency", "concurrency", "workers"},
	{"load.rate", "rate", "req/s"},
	{"load.max_inflight", "max in flight", "requests"},
}

// SeriesAxis returns the load condition the runs differ in when it is the
// only condition that affects speed in which any run differs from the
// baseline (see loadAxes): the axis of a load series, its name and unit.
// ok is false when the runs are comparable as they are or differ in
// anything else.
func (c *Comparison) SeriesAxis() (field, name, unit string, ok bool) {
	for i := 1; i < len(c.Runs); i++ {
		for _, d := range Blocking(c.Differences[i]) {
			if field == "" {
				field = d.Field
			}
			if d.Field != field {
				return "", "", "", false
			}
		}
	}
	for _, a := range loadAxes {
		if a.field == field {
			return a.field, a.name, a.unit, true
		}
	}
	return "", "", "", false
}

// axisValue is run i's value of the condition field.
func (c *Comparison) axisValue(i int, field string) string {
	return flatten(c.Runs[i].Conditions)[field]
}

// Comparable reports whether no run differs from the baseline in a
// condition that affects speed.
func (c *Comparison) Comparable() bool {
	for _, d := range c.Differences {
		if len(Blocking(d)) > 0 {
			return false
		}
	}
	return true
}

// WriteDifferences names every differing condition, blocking ones first.
func (c *Comparison) WriteDifferences(w io.Writer) {
	for i := 1; i < len(c.Runs); i++ {
		ds := c.Differences[i]
		if len(ds) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s vs %s:\n", c.Names[i], c.Names[0])
		for _, blocking := range []bool{true, false} {
			for _, d := range ds {
				if d.Blocking != blocking {
					continue
				}
				tag := "differs (affects speed)"
				if !blocking {
					tag = "differs (informational)"
				}
				fmt.Fprintf(w, "  %-28s %s: %s → %s\n", d.Field, tag, short(d.A), short(d.B))
			}
		}
	}
}

func short(s string) string {
	if len(s) > 80 {
		return s[:77] + "…"
	}
	return s
}

// WriteTable prints p50, p95 and p99 of every metric for each run with the
// ratio to the baseline, then the failure-inclusive latencies, the error
// rate and the throughput. Unless the runs are comparable, the title says
// NOT COMPARABLE.
func (c *Comparison) WriteTable(w io.Writer) error {
	names := c.Names
	field, axis, unit, series := c.SeriesAxis()
	switch {
	case series:
		// Each column is labelled with its load, in the order given.
		names = make([]string, len(c.Names))
		var values []string
		for i, n := range c.Names {
			v := c.axisValue(i, field)
			names[i] = fmt.Sprintf("%s=%s (%s)", axis, v, n)
			values = append(values, v)
		}
		fmt.Fprintf(w, "load series over %s (%s): %s — the runs agree in everything else that affects speed; each column is the same setup under another load, not a ranking.\n",
			axis, unit, strings.Join(values, ", "))
	case !c.Comparable():
		fmt.Fprintln(w, "NOT COMPARABLE — the runs differ in conditions that affect speed (listed above); the numbers below must not be read as a ranking.")
	default:
		fmt.Fprintln(w, "comparable: the runs' conditions agree in everything that affects speed.")
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := []string{"metric", "stat"}
	for i, n := range names {
		head = append(head, n)
		if i > 0 && !series {
			head = append(head, n+"/"+names[0])
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	row := func(metric, stat string, get func(r *Result) *Value) {
		cells := []string{metric, stat}
		base := get(c.Runs[0])
		for i, r := range c.Runs {
			v := get(r)
			cells = append(cells, fmtV(v))
			if i > 0 && !series {
				cells = append(cells, ratio(v, base))
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	pcts := []struct {
		name string
		get  func(s *Stat) *Value
	}{
		{"p50", func(s *Stat) *Value { return s.P50 }},
		{"p95", func(s *Stat) *Value { return s.P95 }},
		{"p99", func(s *Stat) *Value { return s.P99 }},
	}
	for _, m := range Metrics {
		for j, p := range pcts {
			name := m.Name
			if j > 0 {
				name = ""
			}
			row(name, p.name, func(r *Result) *Value { return p.get(r.Summary.Metric(m.Name)) })
		}
	}
	for _, m := range Metrics {
		if !m.Latency {
			continue
		}
		for j, p := range pcts {
			name := m.Name + " (with failures)"
			if j > 0 {
				name = ""
			}
			row(name, p.name, func(r *Result) *Value {
				st := r.Summary.WithFailures[m.Name]
				return p.get(&st)
			})
		}
	}
	val := func(f func(s *Summary) float64) func(r *Result) *Value {
		return func(r *Result) *Value { v := Value(f(&r.Summary)); return &v }
	}
	row("error_rate", "", val(func(s *Summary) float64 { return s.Requests.ErrorRate }))
	cells := []string{"requests", "ok/failed"}
	for i, r := range c.Runs {
		cells = append(cells, fmt.Sprintf("%d/%d", r.Summary.Requests.OK, r.Summary.Requests.Failed))
		if i > 0 && !series {
			cells = append(cells, "")
		}
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	row("throughput", "req/s", val(func(s *Summary) float64 { return s.Throughput.RequestsPerS }))
	row("", "output tok/s", val(func(s *Summary) float64 { return s.Throughput.OutputTokensPerS }))
	tw.Flush()
	_, err := fmt.Fprintf(w, "percentile method: %s\n", c.Runs[0].Summary.PercentileMethod)
	return err
}

func ratio(v, base *Value) string {
	x, ok1 := v.Get()
	y, ok2 := base.Get()
	switch {
	case !ok1 || !ok2:
		return "-"
	case v.IsInf() || base.IsInf():
		if v.IsInf() && base.IsInf() {
			return "-"
		}
		if v.IsInf() {
			return "+Inf"
		}
		return "0"
	case y == 0:
		return "-"
	}
	return strconv.FormatFloat(x/y, 'f', 3, 64)
}
