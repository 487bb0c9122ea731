package web

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"

	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// mark is one milestone of a request, as an offset from its t0.
type mark struct {
	Key  string // t1 … t7
	Name string
	At   float64 // ms since t0
	OK   bool    // false: the mark is absent
}

func offset(o timeline.Offset) (float64, bool) { return o.Ms() }

// marks returns the request-level milestones t1…t7 in timeline order
// (SPEC.md §1); t1 and t2 are those of the relayed (or last) attempt.
func marks(r *record.Record) []mark {
	m := func(key, name string, o timeline.Offset) mark {
		v, ok := offset(o)
		return mark{key, name, v, ok}
	}
	return []mark{
		m("t1", "upstream start", r.UpstreamStartMs),
		m("t2", "headers", r.UpstreamHeadersAtMs),
		m("t3", "first event", r.FirstSSEEventMs),
		m("t4", "first effective response", r.FirstResponseMs),
		m("t5", "first visible text", r.FirstTextDeltaMs),
		m("t6", "upstream done", r.UpstreamDoneMs),
		m("t7", "handler done", r.TotalHandlerMs),
	}
}

// endMs is the last present mark of a request, 0 when it has none.
func endMs(r *record.Record) float64 {
	end := 0.0
	for _, m := range marks(r) {
		if m.OK {
			end = math.Max(end, m.At)
		}
	}
	for _, a := range r.Attempts {
		if v, ok := offset(a.UpstreamHeadersAtMs); ok {
			end = math.Max(end, v)
		}
	}
	return end
}

// stageName names the stretch that ends at a mark, for tooltips and the
// legend.
var stageName = map[string]string{
	"t1": "local phases (t0 → t1)",
	"t2": "waiting for headers (t1 → t2)",
	"t3": "headers → first event (t2 → t3)",
	"t4": "first event → first effective response (t3 → t4)",
	"t5": "first effective response → first visible text (t4 → t5)",
	"t6": "generation to upstream done (→ t6)",
	"t7": "upstream done → handler done (t6 → t7)",
}

// miniWaterfall draws a request's stages as one bar on a 0..scale ms axis
// shared by the rows of a page, so that slow requests are long and slow
// stages stand out by colour. Absent marks draw no segment: the next
// present mark's segment starts where the last present one ended.
func miniWaterfall(r *record.Record, scale float64) template.HTML {
	var s svgw
	s.printf(`<svg class="mini" width="100%%" height="14" role="img" aria-label="waterfall">`)
	s.printf(`<rect class="track" x="0" y="3" width="100%%" height="8"/>`)
	prev := 0.0
	var tip []string
	for _, m := range marks(r) {
		if !m.OK {
			tip = append(tip, m.Name+": absent")
			continue
		}
		if m.Key == "t1" {
			// Before the relayed attempt's t1, earlier attempts may have
			// run: the race it won (a hedge) or the failures it followed.
			// That is not the gateway's local time.
			if from, name, ok := earlierAttempts(r, m.At); ok {
				if from > prev {
					s.printf(`<rect class="seg seg-t1" x="%s" y="3" width="%s" height="8"><title>%s: %s</title></rect>`,
						pct(prev, scale), pct(from-prev, scale), esc("local phases (t0 → first attempt)"), ms(from-prev))
				}
				s.printf(`<rect class="seg seg-race" x="%s" y="3" width="%s" height="8"><title>%s: %s</title></rect>`,
					pct(from, scale), pct(m.At-from, scale), esc(name), ms(m.At-from))
				tip = append(tip, fmt.Sprintf("%s %s", m.Name, ms(m.At)))
				prev = math.Max(prev, m.At)
				continue
			}
		}
		if m.At > prev {
			s.printf(`<rect class="seg seg-%s" x="%s" y="3" width="%s" height="8"><title>%s: %s</title></rect>`,
				m.Key, pct(prev, scale), pct(m.At-prev, scale), esc(stageName[m.Key]), ms(m.At-prev))
		}
		tip = append(tip, fmt.Sprintf("%s %s", m.Name, ms(m.At)))
		prev = math.Max(prev, m.At)
	}
	if prev == 0 {
		s.printf(`<text class="empty" x="2" y="11">no marks</text>`)
	}
	s.printf(`<title>%s</title></svg>`, esc(strings.Join(tip, " · ")))
	return s.html()
}

// earlierAttempts reports whether an attempt started before the relayed
// one's t1 (at ms): from when, and what the time until t1 was: the hedge
// race (the primary ran, then the hedge that won started) or earlier
// attempts that failed.
func earlierAttempts(r *record.Record, t1 float64) (from float64, name string, ok bool) {
	from = t1
	hedged := false
	for _, a := range r.Attempts {
		if v, vok := offset(a.UpstreamStartMs); vok && v < from {
			from = v
		}
		hedged = hedged || a.Role == record.RoleHedge
	}
	if from >= t1 {
		return 0, "", false
	}
	if hedged {
		return from, "waiting for the hedge race (the primary's attempt, then the hedge that won)", true
	}
	return from, "earlier attempts, before the relayed one", true
}

// wfRow is one row of the detail waterfall: a stretch of the timeline (or
// a marker when Start == End) with its duration and what it means.
type wfRow struct {
	Label  string
	Sub    string  // second line: the fields it is made of
	Class  string  // bar class
	Gap    string  // data-gap: the name tests and readers find it by
	Start  float64 // ms since t0
	End    float64
	Text   string // the duration or value, as shown
	Flag   string // the verdict label that points at this stretch; "" for none
	Dashed bool   // inferred extent (a failed attempt runs until the next one starts)
	Absent bool   // the stretch did not happen; drawn as text only
}

// Bar returns the row's track as SVG in percent coordinates.
func (w wfRow) Bar(scale float64) template.HTML {
	var s svgw
	s.printf(`<svg class="track-row" width="100%%" height="16" role="img" aria-label="%s">`, esc(w.Label))
	s.printf(`<rect class="track" x="0" y="4" width="100%%" height="8"/>`)
	if !w.Absent {
		cls := "seg " + w.Class
		if w.Dashed {
			cls += " dashed"
		}
		if w.Flag != "" {
			cls += " flagged"
		}
		width := w.End - w.Start
		if width <= 0 {
			// A marker: a stretch of no length is drawn as a thin line.
			s.printf(`<rect class="%s" x="%s" y="1" width="2" height="14"><title>%s</title></rect>`, esc(cls), pct(w.Start, scale), esc(w.Text))
		} else {
			s.printf(`<rect class="%s" x="%s" y="2" width="%s" height="12"><title>%s: %s</title></rect>`,
				esc(cls), pct(w.Start, scale), pct(width, scale), esc(w.Label), esc(w.Text))
		}
	}
	s.WriteString(`</svg>`)
	return s.html()
}

// flagsByGap maps a rule label to the detail rows (by Gap) it points at.
var flagsByGap = map[string][]string{
	diagnose.UpstreamHeadersSlow: {"headers"},
	diagnose.FirstResponseSlow:   {"headers_to_event", "event_to_response"},
	diagnose.EventToResponseGap:  {"event_to_response"},
	diagnose.ResponseToTextGap:   {"response_to_text"},
	diagnose.GenerationSlow:      {"generation"},
	diagnose.GenerationStalled:   {"output_gap"},
}

// detailRows lays out a request's waterfall: local phases, each attempt on
// its own row, then the stretches between the request-level marks, each
// from marks of one origin (t0), never a difference of durations.
func detailRows(r *record.Record) (rows []wfRow, scale float64) {
	end := endMs(r)
	scale = waterfallScale(end)

	// Local phases are durations with their own origin (SPEC.md §1); the
	// gateway runs them one after the other from t0 (auth, body read,
	// routing), so they are drawn in that order from 0.
	auth, aok := r.AuthMs.Ms()
	body, bok := r.BodyReadMs.Ms()
	dist, dok := r.DistributionMs.Ms()
	local := wfRow{Label: "local phases", Gap: "local", Class: "seg-t1", Sub: "auth_ms + body_read_ms + distribution_ms"}
	if aok || bok || dok {
		local.End = auth + body + dist
		var parts []string
		for _, p := range []struct {
			name string
			v    float64
			ok   bool
		}{{"auth", auth, aok}, {"body read", body, bok}, {"routing", dist, dok}} {
			if p.ok {
				parts = append(parts, p.name+" "+ms(p.v))
			} else {
				parts = append(parts, p.name+" absent")
			}
		}
		// A wait for the gateway's own limits (after the body, before
		// routing) is named only when the request queued.
		if adm, ok := r.AdmissionWaitMs.Ms(); ok {
			local.End += adm
			local.Sub += " + admission_wait_ms"
			parts = slices.Insert(parts, 2, "admission wait "+ms(adm))
		}
		local.Text = strings.Join(parts, " · ")
	} else {
		local.Absent, local.Text = true, "absent"
	}
	// The request's wait before t0 (an overloaded gateway) is a local
	// phase too, though it cannot be drawn after t0: it is named.
	if wait, ok := r.RequestWaitMs.Ms(); ok {
		local.Sub += " (+ request_wait_ms before t0)"
		wt := "waited " + ms(wait) + " before t0"
		if local.Absent {
			local.Absent, local.Text = false, wt
		} else {
			local.Text += " · " + wt
		}
	}
	rows = append(rows, local)

	// Attempts: t1 → t2 of each, with its own outcome. A failed attempt
	// without headers runs, dashed, until the next attempt starts (time
	// the user waited for it), or to the end for the last.
	for i, a := range r.Attempts {
		start, sok := offset(a.UpstreamStartMs)
		row := wfRow{Label: fmt.Sprintf("attempt %d · %s", i+1, a.Channel), Gap: "attempt", Class: "seg-t2",
			Sub: "upstream_headers_ms (t2 − t1)"}
		if a.Role != "" {
			// A hedge race shows both attempts; the winner is marked.
			row.Label += " · " + a.Role
			if a.Outcome != "" {
				row.Label += " · " + a.Outcome
			}
		}
		outcome := a.Status
		if a.HTTPStatus != 0 {
			outcome += fmt.Sprintf(" %d", a.HTTPStatus)
		}
		if a.Error != "" {
			outcome += " — " + a.Error
		}
		hd, hok := a.UpstreamHeadersMs.Ms()
		hat, haok := offset(a.UpstreamHeadersAtMs)
		switch {
		case !sok:
			row.Absent, row.Text = true, "not started · "+outcome
		case haok:
			row.Start, row.End = start, hat
			row.Text = ms(hd) + " to headers · " + outcome
			if !hok {
				row.Text = "headers at " + ms(hat) + " · " + outcome
			}
		default:
			row.Start, row.End, row.Dashed = start, end, true
			if i+1 < len(r.Attempts) {
				if next, ok := offset(r.Attempts[i+1].UpstreamStartMs); ok {
					row.End = next
				}
			}
			row.Text = "no headers · " + outcome
		}
		switch {
		case a.Status == record.AttemptHedgeLost:
			// Cancelled by the gateway because the other attempt won:
			// neither a failure nor the client's doing.
			row.Class = "seg-lost"
			row.Text += " (lost the hedge race)"
		case a.Status != record.StatusOK:
			row.Class = "seg-fail"
		default:
			// The relayed attempt: its t1 → t2 is upstream_headers_ms.
			row.Gap = "headers"
		}
		rows = append(rows, row)
	}

	stretch := func(label, gap, class, sub string, from, to timeline.Offset) wfRow {
		a, aok := offset(from)
		b, bok := offset(to)
		row := wfRow{Label: label, Gap: gap, Class: class, Sub: sub}
		if !aok || !bok {
			row.Absent = true
			switch {
			case !aok && !bok:
				row.Text = "absent (neither mark happened)"
			case !bok:
				row.Text = "absent (the later mark did not happen)"
			default:
				row.Text = "absent (the earlier mark did not happen)"
			}
			return row
		}
		row.Start, row.End, row.Text = a, b, ms(b-a)
		return row
	}
	rows = append(rows,
		stretch("headers → first event", "headers_to_event", "seg-t3", "t3 − t2", r.UpstreamHeadersAtMs, r.FirstSSEEventMs),
		stretch("first event → first effective response", "event_to_response", "seg-t4", "t4 − t3", r.FirstSSEEventMs, r.FirstResponseMs),
		stretch("first effective response → first visible text", "response_to_text", "seg-t5", "t5 − t4", r.FirstResponseMs, r.FirstTextDeltaMs))
	if r.FirstTextDeltaMs.Valid() || !r.FirstResponseMs.Valid() {
		gen := stretch("generation: first visible text → upstream done", "generation", "seg-t6", "t6 − t5", r.FirstTextDeltaMs, r.UpstreamDoneMs)
		if v, ok := r.VisibleOutputTPS.Get(); ok && !gen.Absent {
			gen.Text += " · " + tps(v)
		}
		rows = append(rows, gen)
	} else {
		// Tool calls or reasoning and no text: the output still ran.
		rows = append(rows, stretch("output without text: first effective response → upstream done", "generation", "seg-t6", "t6 − t4", r.FirstResponseMs, r.UpstreamDoneMs))
	}
	// The longest silence between two content events: a span of its own
	// origin that ended at max_output_gap_at_ms (from t0), so it is drawn
	// back from there. Absent with fewer than two content events.
	gapRow := wfRow{Label: "longest output gap: no content between two events", Gap: "output_gap", Class: "seg-gap",
		Sub: "max_output_gap_ms, ending at max_output_gap_at_ms"}
	gap, gok := r.MaxOutputGapMs.Ms()
	gapEnd, eok := offset(r.MaxOutputGapAtMs)
	if gok && eok {
		gapRow.Start, gapRow.End = math.Max(gapEnd-gap, 0), gapEnd
		gapRow.Text = ms(gap) + " · ended at " + ms(gapEnd)
	} else {
		gapRow.Absent, gapRow.Text = true, "absent (fewer than two content events)"
	}
	rows = append(rows, gapRow)
	lag := stretch("relay lag: first text received → sent to client", "relay_lag", "seg-lag", "first_text_sent_ms − first_text_delta_ms", r.FirstTextDeltaMs, r.FirstTextSentMs)
	if r.HeadersSentMs.Valid() {
		// Held while a fallback was still possible (SPEC §5); about 0
		// when they went out at t2.
		label := "headers held: upstream headers → sent to client"
		if _, name, ok := earlierAttempts(r, math.Inf(1)); ok && strings.HasPrefix(name, "waiting for the hedge race") {
			// Hedging holds the headers until the race's winner has its
			// first output: the cost of hedging (SPEC.md §12).
			label = "held for hedging: upstream headers → sent to client at the winner's first output"
		}
		rows = append(rows, stretch(label, "headers_held", "seg-lag", "headers_sent_ms − upstream_headers_at_ms", r.UpstreamHeadersAtMs, r.HeadersSentMs))
	}
	rows = append(rows, lag,
		stretch("tail: upstream done → handler done", "tail", "seg-t7", "t7 − t6", r.UpstreamDoneMs, r.TotalHandlerMs))

	for _, label := range r.Diagnosis {
		gaps := flagsByGap[label]
		if label == diagnose.LocalOverhead {
			// The rule fires on the local phases or on the tail; point at
			// the longer of the two.
			gaps = []string{"local"}
			if t := rowByGap(rows, "tail"); t != nil && !t.Absent && t.End-t.Start > rows[0].End-rows[0].Start {
				gaps = []string{"tail"}
			}
		}
		for i := range rows {
			if slices.Contains(gaps, rows[i].Gap) && !rows[i].Absent && rows[i].Flag == "" {
				rows[i].Flag = label
			}
		}
	}
	return rows, scale
}

func rowByGap(rows []wfRow, gap string) *wfRow {
	for i := range rows {
		if rows[i].Gap == gap {
			return &rows[i]
		}
	}
	return nil
}
