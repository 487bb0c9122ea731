package bench

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
)

// WriteHTML writes a self-contained page for a result: no script, no
// external asset, charts as inline SVG. It shows the conditions, the
// summary table, a CDF of each TTFT definition (failed requests count as
// never reaching the mark, so a curve tops out at the share that did), a
// histogram of per-request visible TPS, and a timeline strip with one line
// per request from its write to its last byte and a tick at each mark.
func WriteHTML(w io.Writer, res *Result) error {
	var report strings.Builder
	if err := WriteReport(&report, res); err != nil {
		return err
	}
	data := struct {
		Title      string
		Conditions string
		Report     string
		CDF        template.HTML
		Histogram  template.HTML
		Strip      template.HTML
		StripNote  string
	}{
		Title:      fmt.Sprintf("ttfx bench %s — %s %s", res.Run.ID, res.Conditions.API, res.Conditions.Model),
		Conditions: ConditionsLine(&res.Conditions),
		Report:     report.String(),
		CDF:        cdfSVG(res),
		Histogram:  histogramSVG(res),
	}
	data.Strip, data.StripNote = stripSVG(res)
	return pageTemplate.Execute(w, data)
}

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
pre{background:#f6f6f6;padding:12px;overflow-x:auto;font-size:12px}
svg{background:#fff;border:1px solid #ddd}
svg text{font:11px system-ui,sans-serif}
.note{color:#666;font-size:12px}
</style></head><body>
<h1>{{.Title}}</h1>
<p>{{.Conditions}}</p>
<h2>Time to first X: cumulative distribution</h2>
<p class="note">Share of measured requests (ok and failed; successful requests without the mark are left out) that reached each mark by a given time. A failed request never reaches it, so a curve that stops below 100% shows the failures.</p>
{{.CDF}}
<h2>Visible output speed per request</h2>
<p class="note">visible_output_tps of the successful requests: visible tokens / (last byte − first visible text). Per-user speed, not aggregate throughput.</p>
{{.Histogram}}
<h2>Per-request timeline</h2>
<p class="note">One line per request from its write to its last byte, placed at its start in the run; ticks: headers (grey), first event (blue), first response (orange), first visible text (green). Failed requests are red. {{.StripNote}}</p>
{{.Strip}}
<h2>Summary</h2>
<pre>{{.Report}}</pre>
</body></html>
`))

// Chart geometry.
const (
	chartW, chartH = 900, 320
	padL, padR     = 60, 180
	padT, padB     = 16, 36
	// cdfLegendW widens the CDF for its legend (146 px of padR held
	// "first_response_ms (" and clipped the rest).
	cdfLegendW = 120
)

var ttftColours = map[string]string{
	MetricHeaders: "#888888", MetricFirstEvent: "#1f77b4", MetricFirstResponse: "#ff7f0e", MetricFirstText: "#2ca02c",
}

// ttftStrokes tell the CDF's curves apart where they coincide (a response
// whose first effective output is its first text has equal first_response
// and first_text curves): each has its own dash pattern, and each is drawn
// narrower than the one before, so coinciding curves show as nested stripes
// of their colours rather than the last one hiding the others.
var ttftStrokes = map[string]struct {
	width float64
	dash  string // SVG stroke-dasharray; "" for solid
}{
	MetricHeaders: {6, ""}, MetricFirstEvent: {4.5, "10 3"}, MetricFirstResponse: {3, "5 3"}, MetricFirstText: {1.5, ""},
}

func cdfSVG(res *Result) template.HTML {
	metrics := []string{MetricHeaders, MetricFirstEvent, MetricFirstResponse, MetricFirstText}
	type curve struct {
		name   string
		values []float64
		total  int
	}
	var curves []curve
	maxX := 0.0
	for _, name := range metrics {
		var def MetricDef
		for _, m := range Metrics {
			if m.Name == name {
				def = m
			}
		}
		c := curve{name: name}
		for i := range res.Requests {
			r := &res.Requests[i]
			v, ok := def.value(r)
			switch {
			case r.ok() && ok:
				c.values = append(c.values, v)
				c.total++
				maxX = max(maxX, v)
			case r.failed():
				c.total++
			}
		}
		slices.Sort(c.values)
		curves = append(curves, c)
	}
	var b strings.Builder
	// The legend sits right of the plot, in a column of its own: the
	// longest entry ("first_response_ms (100000/100000)", "…: none
	// reached it") fits it at the legend's font size.
	w := chartW + cdfLegendW
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="CDF of time to first X">`, w, chartH, w, chartH)
	if maxX <= 0 {
		fmt.Fprintf(&b, `<text x="20" y="30">no successful request reached any mark (%d failed)</text></svg>`, res.Summary.Requests.Failed)
		return template.HTML(b.String())
	}
	xMax := niceCeil(maxX)
	x := func(v float64) float64 { return padL + v/xMax*(chartW-padL-padR) }
	y := func(f float64) float64 { return chartH - padB - f*(chartH-padT-padB) }
	axes(&b, xMax, "time since the request was written (ms)", "requests that reached the mark (% of measured)", 5, func(f float64) string { return fmt.Sprintf("%.0f%%", f*100) })
	for i, c := range curves {
		legend := fmt.Sprintf("%s (%d/%d)", c.name, len(c.values), c.total)
		if len(c.values) == 0 {
			legend = c.name + ": none reached it"
		}
		st := ttftStrokes[c.name]
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="%g" stroke-dasharray="%s"/><text x="%d" y="%d" font-size="12" data-legend>%s</text>`,
			chartW-padR+6, chartW-padR+30, padT+16*i+6, padT+16*i+6, ttftColours[c.name], min(st.width, 4), st.dash, chartW-padR+34, padT+16*i+10, legend)
		if len(c.values) == 0 {
			continue
		}
		var pts strings.Builder
		fmt.Fprintf(&pts, "%.1f,%.1f", x(0), y(0))
		for j, v := range c.values {
			prev := float64(j) / float64(c.total)
			cur := float64(j+1) / float64(c.total)
			fmt.Fprintf(&pts, " %.1f,%.1f %.1f,%.1f", x(v), y(prev), x(v), y(cur))
		}
		fmt.Fprintf(&pts, " %.1f,%.1f", x(xMax), y(float64(len(c.values))/float64(c.total)))
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%g" stroke-dasharray="%s" stroke-opacity="0.85" points="%s"><title>%s</title></polyline>`,
			ttftColours[c.name], st.width, st.dash, pts.String(), c.name)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func histogramSVG(res *Result) template.HTML {
	var vals []float64
	for i := range res.Requests {
		r := &res.Requests[i]
		if v, ok := r.VisibleOutputTPS.Get(); ok && r.ok() {
			vals = append(vals, v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="histogram of visible output TPS">`, chartW, chartH, chartW, chartH)
	if len(vals) == 0 {
		b.WriteString(`<text x="20" y="30">no successful request had a visible output speed (no visible text, or fewer than 2 visible tokens)</text></svg>`)
		return template.HTML(b.String())
	}
	xMax := niceCeil(slices.Max(vals))
	const bins = 30
	counts := make([]int, bins)
	for _, v := range vals {
		k := int(v / xMax * bins)
		counts[min(max(k, 0), bins-1)]++
	}
	top := niceCeil(float64(slices.Max(counts)))
	plotW := float64(chartW - padL - padR)
	x := func(v float64) float64 { return padL + v/xMax*plotW }
	y := func(f float64) float64 { return chartH - padB - f*(chartH-padT-padB) }
	// Whole counts on the y axis: top is 1, 2 or 5 times a power of ten.
	yTicks := 5
	if top < 5 {
		yTicks = int(top)
	}
	axes(&b, xMax, "visible output speed (tokens/s)", "requests (count)", yTicks, func(f float64) string { return fmt.Sprintf("%.0f", f*top) })
	for k, n := range counts {
		if n == 0 {
			continue
		}
		x0 := x(float64(k) / bins * xMax)
		bw := plotW/bins - 1
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2ca02c"><title>%d requests</title></rect>`,
			x0, y(float64(n)/top), bw, y(0)-y(float64(n)/top), n)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">%d requests</text>`, chartW-padR+10, padT+10, len(vals))
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// maxStrip bounds the requests drawn in the timeline strip.
const maxStrip = 600

func stripSVG(res *Result) (template.HTML, string) {
	rows := res.Requests
	note := ""
	if len(rows) > maxStrip {
		note = fmt.Sprintf("The first %d of %d requests are drawn.", maxStrip, len(rows))
		rows = rows[:maxStrip]
	}
	type span struct {
		start, end float64
		marks      [4]float64 // -1 when absent
		failed     bool
	}
	var spans []span
	xMax := 0.0
	for i := range rows {
		r := &rows[i]
		st, ok := r.StartMs.Ms()
		if !ok {
			continue
		}
		e, ok := r.EndToEndMs.Ms()
		if !ok {
			e = 0
		}
		s := span{start: st, end: st + e, failed: r.failed()}
		for k, o := range []interface{ Ms() (float64, bool) }{r.TimeToHeadersMs, r.FirstSSEEventMs, r.FirstResponseMs, r.FirstTextDeltaMs} {
			s.marks[k] = -1
			if v, ok := o.Ms(); ok {
				s.marks[k] = st + v
			}
		}
		xMax = max(xMax, s.end)
		spans = append(spans, s)
	}
	const rowH = 4
	h := padT + padB + rowH*max(len(spans), 1)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="per-request timeline">`, chartW, h, chartW, h)
	if len(spans) == 0 || xMax <= 0 {
		b.WriteString(`<text x="20" y="30">no request to draw</text></svg>`)
		return template.HTML(b.String()), note
	}
	xm := niceCeil(xMax)
	x := func(v float64) float64 { return padL + v/xm*(chartW-padL-padR) }
	for k := 0; k <= 5; k++ {
		v := xm * float64(k) / 5
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			x(v), x(v), padT, h-padB, x(v), h-padB+14, fmtAxis(v))
	}
	axisTitles(&b, "time since the run's start (ms)", "requests (one row each, in start order)", h)
	colours := [4]string{"#888888", "#1f77b4", "#ff7f0e", "#2ca02c"}
	for i, s := range spans {
		yy := float64(padT + rowH*i + rowH/2)
		stroke := "#bbbbbb"
		if s.failed {
			stroke = "#d62728"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x(s.start), math.Max(x(s.end), x(s.start)+1), yy, yy, stroke)
		for k, m := range s.marks {
			if m >= 0 {
				fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="2" height="%d" fill="%s"/>`, x(m)-1, yy-rowH/2, rowH, colours[k])
			}
		}
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()), note
}

// axes draws the x axis from 0 to xMax and the y axis from 0 to 1 in
// yTicks steps labelled by ylabel, each titled with what it measures and
// its unit.
func axes(b *strings.Builder, xMax float64, xTitle, yTitle string, yTicks int, ylabel func(f float64) string) {
	x := func(v float64) float64 { return padL + v/xMax*(chartW-padL-padR) }
	y := func(f float64) float64 { return chartH - padB - f*(chartH-padT-padB) }
	for k := 0; k <= 5; k++ {
		v := xMax * float64(k) / 5
		fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#eee"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`,
			x(v), x(v), padT, chartH-padB, x(v), chartH-padB+14, fmtAxis(v))
	}
	for k := 0; k <= yTicks; k++ {
		f := float64(k) / float64(yTicks)
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`,
			padL, chartW-padR, y(f), y(f), padL-6, y(f)+4, ylabel(f))
	}
	axisTitles(b, xTitle, yTitle, chartH)
}

// axisTitles writes the titles of a chart of height h's axes: what each
// measures and its unit.
func axisTitles(b *strings.Builder, xTitle, yTitle string, h int) {
	fmt.Fprintf(b, `<text class="axis-x" x="%d" y="%d" text-anchor="middle">%s</text>`, padL+(chartW-padL-padR)/2, h-4, template.HTMLEscapeString(xTitle))
	fmt.Fprintf(b, `<text class="axis-y" transform="translate(12 %d) rotate(-90)" text-anchor="middle">%s</text>`, padT+(h-padT-padB)/2, template.HTMLEscapeString(yTitle))
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func fmtAxis(v float64) string {
	if v >= 10 || v == 0 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2g", v)
}
