package bench

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Merge combines runs made under the same conditions (typically from
// several machines at once) into one result. Every statistic is
// recomputed from the union of the rows, so the merged percentiles are
// exact, not averages of percentiles. Only two numbers need the machines'
// wall clocks to agree (NTP-synchronised clocks are off by milliseconds):
// the merged window, from the earliest first write to the latest last
// byte across the runs, over which aggregate throughput and mean
// concurrency are computed. The achieved rate is the sum of each run's
// own, the requested load the per-machine load times the machines.
func Merge(runs []*Result) (*Result, error) {
	if len(runs) < 2 {
		return nil, errors.New("merge: give at least two results")
	}
	base := runs[0].Conditions
	machines := 0
	seen := map[string]bool{}
	for i, r := range runs {
		if r.Run.ID == "" {
			return nil, fmt.Errorf("merge: result %d has no run id", i+1)
		}
		machines += max(r.Conditions.Machines, 1)
		if i == 0 {
			continue
		}
		a, b := base, r.Conditions
		a.Machines, b.Machines = 0, 0
		if bl := Blocking(Differences(a, b)); len(bl) > 0 {
			var names []string
			for _, d := range bl {
				names = append(names, fmt.Sprintf("%s (%s vs %s)", d.Field, short(d.A), short(d.B)))
			}
			return nil, fmt.Errorf("merge: result %d was made under other conditions than result 1: %s", i+1, strings.Join(names, "; "))
		}
	}

	out := &Result{Format: Format, Conditions: base, Warmup: Warmup{Statuses: map[string]int{}}}
	out.Conditions.Machines = machines
	out.Run.ID = newRunID()
	var winStart, winEnd time.Time
	var rate float64
	rated := false
	for _, r := range runs {
		for _, row := range r.Requests {
			if !seen[row.Run+"/"+fmt.Sprint(row.Index)] {
				seen[row.Run+"/"+fmt.Sprint(row.Index)] = true
				out.Requests = append(out.Requests, row)
			} else {
				return nil, fmt.Errorf("merge: request %d of run %s is in more than one result", row.Index, row.Run)
			}
		}
		srcs := r.Run.Sources
		if len(srcs) == 0 {
			srcs = []Source{{ID: r.Run.ID, Host: r.Run.Host, Started: r.Run.Started, Requests: len(r.Requests),
				WindowMs: r.Summary.Window.DurationMs}}
		}
		out.Run.Sources = append(out.Run.Sources, srcs...)
		out.Run.Interrupted = out.Run.Interrupted || r.Run.Interrupted
		if out.Run.Started.IsZero() || r.Run.Started.Before(out.Run.Started) {
			out.Run.Started = r.Run.Started
		}
		out.Warmup.Requests += r.Warmup.Requests
		out.Warmup.OK += r.Warmup.OK
		for k, v := range r.Warmup.Statuses {
			out.Warmup.Statuses[k] += v
		}
		if a := r.Summary.Load.AchievedRate; a != nil {
			rate += *a
			rated = true
		}
		// The run's window on the wall clock: its schedule origin is
		// Started, rows' start_ms and end_to_end_ms are from it.
		for _, row := range r.Requests {
			st, ok := row.StartMs.Get()
			if !ok {
				continue
			}
			s := r.Run.Started.Add(st)
			e := s
			if d, ok := row.EndToEndMs.Get(); ok {
				e = s.Add(d)
			}
			if winStart.IsZero() || s.Before(winStart) {
				winStart = s
			}
			if e.After(winEnd) {
				winEnd = e
			}
		}
	}
	if out.Requests == nil {
		out.Requests = []Row{}
	}
	window := time.Duration(0)
	if winEnd.After(winStart) {
		window = winEnd.Sub(winStart)
	}
	s := Summarize(out.Requests, window, out.Conditions.Load)
	// The load of k machines is k times one machine's.
	switch out.Conditions.Load.Mode {
	case ModeRate:
		req := base.Load.Rate * float64(machines)
		s.Load.RequestedRate = &req
	case ModeConcurrency:
		req := base.Load.Concurrency * machines
		s.Load.RequestedConcurrency = &req
	}
	s.Load.AchievedRate = nil
	if rated {
		s.Load.AchievedRate = &rate
	}
	s.Definitions["window"] = "Merged: earliest first request written to latest last byte across the merged runs, on their wall clocks."
	s.Definitions["sources"] = "run.sources lists the merged runs with their own windows (each on its own monotonic clock)."
	out.Summary = s
	return out, nil
}
