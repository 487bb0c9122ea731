package web

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

// The charts are SVG written here. Every string that comes from a record
// or a configuration (model, channel, label) goes through esc; numbers are
// formatted by the code. Styling is by class (assets/app.css): the page's
// Content-Security-Policy allows no inline style.

func esc(s string) string { return html.EscapeString(s) }

// f writes a coordinate with two decimals, enough at any screen size.
func f(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// pct writes a position on a 0..scale axis as a percentage, for the charts
// drawn in percent coordinates (they stretch to any width without
// distorting text).
func pct(v, scale float64) string {
	if scale <= 0 {
		return "0%"
	}
	p := v / scale * 100
	p = math.Max(0, math.Min(100, p))
	return strconv.FormatFloat(p, 'f', 3, 64) + "%"
}

type svgw struct{ strings.Builder }

func (s *svgw) printf(format string, args ...any) { fmt.Fprintf(&s.Builder, format, args...) }

func (s *svgw) html() template.HTML { return template.HTML(s.String()) }

// unitScale picks the unit an axis of milliseconds is labelled in: seconds
// once the axis reaches ten seconds, so tick labels stay short.
func unitScale(topMs float64) (div float64, unit string) {
	if topMs >= 10000 {
		return 1000, "s"
	}
	return 1, "ms"
}

// point is one bucket of a time series; V nil means no record of the
// bucket had the field (absent), drawn as a gap.
type point struct {
	T time.Time // bucket start
	V *float64
	N int // records with the field present
}

// series is one line of a time chart.
type series struct {
	Name   string // p50, p95
	Class  string // CSS class of the line
	Points []point
}

// timeChart is a time series of one field in milliseconds.
type timeChart struct {
	Title  string
	Field  string
	From   time.Time
	To     time.Time
	Bucket time.Duration
	Loc    *time.Location
	Series []series
	Link   func(from, to time.Time) string // drill-down of a bucket; nil for none
	// FamilyMax is the largest value among the charts shown together with
	// this one (ms): the axis unit is chosen from it, so that one family of
	// charts has one unit. 0: from this chart's own values.
	FamilyMax float64
}

// Geometry of the time charts, in viewBox units. The viewBox keeps its
// aspect ratio, so text shrinks with the chart on narrow screens; 480 wide
// keeps 12-unit text readable down to a 360 px chart.
const (
	tcW, tcH                         = 480.0, 200.0
	tcLeft, tcRight, tcTop, tcBottom = 50.0, 12.0, 14.0, 36.0
)

// SVG draws the chart: an axis in ms (or s), time ticks in the viewer's
// zone, one path per series broken wherever a bucket is absent, and a dot
// per present bucket with its value in a tooltip.
func (c timeChart) SVG() template.HTML {
	var s svgw
	maxV := 0.0
	present := 0
	for _, se := range c.Series {
		for _, p := range se.Points {
			if p.V != nil {
				maxV = math.Max(maxV, *p.V)
				present++
			}
		}
	}
	top, step := niceMax(maxV, 4)
	familyTop, _ := niceMax(math.Max(maxV, c.FamilyMax), 4)
	div, unit := unitScale(familyTop)
	pw, ph := tcW-tcLeft-tcRight, tcH-tcTop-tcBottom
	span := c.To.Sub(c.From).Seconds()
	x := func(t time.Time) float64 { return tcLeft + t.Sub(c.From).Seconds()/span*pw }
	// A bucket is drawn at the middle of the part of it inside the window:
	// the first and last buckets are cut by the window's edges.
	mid := func(start time.Time) time.Time {
		a, b := start, start.Add(c.Bucket)
		if a.Before(c.From) {
			a = c.From
		}
		if b.After(c.To) {
			b = c.To
		}
		if b.Before(a) {
			b = a
		}
		return a.Add(b.Sub(a) / 2)
	}
	y := func(v float64) float64 { return tcTop + ph - v/top*ph }

	s.printf(`<svg class="chart time" viewBox="0 0 %s %s" role="img" aria-label="%s" data-field="%s">`, f(tcW), f(tcH), esc(c.Title), esc(c.Field))
	s.printf(`<title>%s: p50 and p95 per %s bucket</title>`, esc(c.Title), durText(c.Bucket))
	// Y axis with gridlines.
	for i := 0; float64(i)*step <= top*1.0001; i++ {
		v := float64(i) * step
		s.printf(`<line class="grid" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(tcLeft), f(tcW-tcRight), f(y(v)), f(y(v)))
		s.printf(`<text class="tick" x="%s" y="%s" text-anchor="end">%s</text>`, f(tcLeft-4), f(y(v)+4), tickNum(v/div))
	}
	s.printf(`<text class="axis-title" x="12" y="%s" transform="rotate(-90 12 %s)" text-anchor="middle">%s</text>`,
		f(tcTop+ph/2), f(tcTop+ph/2), unit)
	// X axis.
	ticks, layout := timeTicks(c.From, c.To, 5, c.Loc)
	s.printf(`<line class="axis" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(tcLeft), f(tcW-tcRight), f(tcTop+ph), f(tcTop+ph))
	for _, t := range ticks {
		s.printf(`<line class="axis" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(x(t)), f(x(t)), f(tcTop+ph), f(tcTop+ph+4))
		s.printf(`<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, f(x(t)), f(tcTop+ph+16), esc(t.In(c.Loc).Format(layout)))
	}
	s.printf(`<text class="axis-title" x="%s" y="%s" text-anchor="middle">time (%s), %s buckets</text>`,
		f(tcLeft+pw/2), f(tcH-4), esc(c.Loc.String()), durText(c.Bucket))
	if present == 0 {
		s.printf(`<text class="empty" x="%s" y="%s" text-anchor="middle">absent: no request in the window had this mark</text>`,
			f(tcLeft+pw/2), f(tcTop+ph/2))
	}
	for _, se := range c.Series {
		// One subpath per run of consecutive present buckets: a bucket
		// with no value, or a missing bucket, breaks the line.
		var d strings.Builder
		var prev time.Time
		open := false
		for _, p := range se.Points {
			if p.V == nil {
				open = false
				continue
			}
			m := mid(p.T)
			cmd := "L"
			if !open || p.T.Sub(prev) > c.Bucket {
				cmd = "M"
			}
			fmt.Fprintf(&d, "%s%s %s ", cmd, f(x(m)), f(y(*p.V)))
			prev, open = p.T, true
		}
		if d.Len() > 0 {
			s.printf(`<path class="line %s" d="%s"/>`, esc(se.Class), strings.TrimSpace(d.String()))
		}
		for _, p := range se.Points {
			if p.V == nil {
				continue
			}
			m := mid(p.T)
			tip := fmt.Sprintf("%s %s: %s %s (%d requests)", p.T.In(c.Loc).Format("Jan 2 15:04:05"), se.Name, num(*p.V/div), unit, p.N)
			dot := fmt.Sprintf(`<circle class="dot %s" cx="%s" cy="%s" r="2.5"><title>%s</title></circle>`,
				esc(se.Class), f(x(m)), f(y(*p.V)), esc(tip))
			if c.Link != nil {
				dot = fmt.Sprintf(`<a href="%s">%s</a>`, esc(c.Link(p.T, p.T.Add(c.Bucket))), dot)
			}
			s.WriteString(dot)
		}
	}
	s.WriteString(`</svg>`)
	return s.html()
}

// boxRow is one distribution of the box plot.
type boxRow struct {
	Label   string
	S       store.FieldSummary
	Records int
}

// boxPlot draws distributions on a shared axis: a thin line from min to
// max, a box from p50 to p95, a tick at p50 and a diamond at p99. A row
// whose field is absent in every record says so instead of drawing 0.
func boxPlot(rows []boxRow, unit, field string) template.HTML {
	const w, left, right, rowH, top = 480.0, 120.0, 90.0, 26.0, 8.0
	maxV := 0.0
	for _, r := range rows {
		if r.S.Max != nil {
			maxV = math.Max(maxV, *r.S.Max)
		}
	}
	axisTop, step := niceMax(maxV, 4)
	pw := w - left - right
	h := top + rowH*float64(len(rows)) + 34
	x := func(v float64) float64 { return left + v/axisTop*pw }
	var s svgw
	s.printf(`<svg class="chart box" viewBox="0 0 %s %s" role="img" aria-label="distribution of %s" data-field="%s">`, f(w), f(h), esc(field), esc(field))
	axisY := top + rowH*float64(len(rows))
	for i := 0; float64(i)*step <= axisTop*1.0001; i++ {
		v := float64(i) * step
		s.printf(`<line class="grid" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(x(v)), f(x(v)), f(top), f(axisY))
		s.printf(`<text class="tick" x="%s" y="%s" text-anchor="middle">%s</text>`, f(x(v)), f(axisY+14), tickNum(v))
	}
	s.printf(`<text class="axis-title" x="%s" y="%s" text-anchor="middle">%s</text>`, f(left+pw/2), f(h-4), esc(unit))
	for i, r := range rows {
		cy := top + rowH*float64(i) + rowH/2
		label := r.Label
		if len([]rune(label)) > 18 {
			label = string([]rune(label)[:17]) + "…"
		}
		s.printf(`<g class="box-row" data-label="%s"><title>%s</title>`, esc(r.Label), esc(boxTip(r, unit)))
		s.printf(`<text class="label" x="%s" y="%s" text-anchor="end">%s</text>`, f(left-6), f(cy+4), esc(label))
		if r.S.Count == 0 || r.S.Min == nil {
			s.printf(`<text class="empty" x="%s" y="%s">absent in all %d requests</text>`, f(left+4), f(cy+4), r.Records)
			s.WriteString(`</g>`)
			continue
		}
		sm := r.S
		s.printf(`<line class="whisker" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(x(*sm.Min)), f(x(*sm.Max)), f(cy), f(cy))
		s.printf(`<rect class="iqr" x="%s" y="%s" width="%s" height="12"/>`, f(x(*sm.P50)), f(cy-6), f(math.Max(1, x(*sm.P95)-x(*sm.P50))))
		s.printf(`<line class="median" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(x(*sm.P50)), f(x(*sm.P50)), f(cy-8), f(cy+8))
		px := x(*sm.P99)
		s.printf(`<path class="p99" d="M%s %sl4 4l-4 4l-4 -4z"/>`, f(px), f(cy-4))
		s.printf(`<text class="value" x="%s" y="%s">p50 %s</text>`, f(w-right+6), f(cy+4), num(*sm.P50))
		s.WriteString(`</g>`)
	}
	s.WriteString(`</svg>`)
	return s.html()
}

func boxTip(r boxRow, unit string) string {
	sm := r.S
	if sm.Count == 0 || sm.Min == nil {
		return fmt.Sprintf("%s: absent in all %d requests", r.Label, r.Records)
	}
	return fmt.Sprintf("%s (%s): n=%d, absent %d · min %s · p50 %s · p90 %s · p95 %s · p99 %s · max %s",
		r.Label, unit, sm.Count, sm.Absent, num(*sm.Min), num(*sm.P50), num(*sm.P90), num(*sm.P95), num(*sm.P99), num(*sm.Max))
}

// bar is one row of a horizontal bar chart.
type bar struct {
	Label   string
	Value   int
	Primary int    // a second, darker bar inside the first (verdicts: as primary); 0 for none
	Class   string // CSS class of the bar
	Link    string // where clicking the row leads; "" for nowhere
}

// hbars draws counts as horizontal bars on a shared axis of unit.
func hbars(bars []bar, unit, name string) template.HTML {
	const w, left, right, rowH, top = 480.0, 180.0, 60.0, 22.0, 4.0
	maxV := 1
	for _, b := range bars {
		maxV = max(maxV, b.Value)
	}
	pw := w - left - right
	h := top + rowH*float64(len(bars)) + 24
	var s svgw
	s.printf(`<svg class="chart bars" viewBox="0 0 %s %s" role="img" aria-label="%s" data-chart="%s">`, f(w), f(h), esc(name), esc(name))
	for i, b := range bars {
		y := top + rowH*float64(i)
		bw := float64(b.Value) / float64(maxV) * pw
		row := fmt.Sprintf(`<g class="bar-row" data-label="%s"><title>%s: %d %s`, esc(b.Label), esc(b.Label), b.Value, esc(unit))
		if b.Primary > 0 {
			row += fmt.Sprintf(", %d as the primary verdict", b.Primary)
		}
		row += `</title>`
		row += fmt.Sprintf(`<text class="label" x="%s" y="%s" text-anchor="end">%s</text>`, f(left-6), f(y+15), esc(b.Label))
		row += fmt.Sprintf(`<rect class="bar %s" x="%s" y="%s" width="%s" height="14"/>`, esc(b.Class), f(left), f(y+4), f(math.Max(1, bw)))
		if b.Primary > 0 {
			pwid := float64(b.Primary) / float64(maxV) * pw
			row += fmt.Sprintf(`<rect class="bar primary" x="%s" y="%s" width="%s" height="14"/>`, f(left), f(y+4), f(math.Max(1, pwid)))
		}
		row += fmt.Sprintf(`<text class="value" x="%s" y="%s">%s</text></g>`, f(left+bw+4), f(y+15), group(strconv.Itoa(b.Value)))
		if b.Link != "" {
			row = fmt.Sprintf(`<a href="%s">%s</a>`, esc(b.Link), row)
		}
		s.WriteString(row)
	}
	axisY := top + rowH*float64(len(bars)) + 2
	s.printf(`<line class="axis" x1="%s" x2="%s" y1="%s" y2="%s"/>`, f(left), f(left+pw), f(axisY), f(axisY))
	s.printf(`<text class="axis-title" x="%s" y="%s" text-anchor="middle">%s</text>`, f(left+pw/2), f(h-4), esc(unit))
	s.WriteString(`</svg>`)
	return s.html()
}

// msAxis draws tick labels for a 0..scale ms axis in percent coordinates,
// to sit above waterfall tracks of the same scale. scale should come from
// waterfallScale, so that the last tick is the end of the axis.
func msAxis(scale float64) template.HTML {
	step := niceStep(scale, 6)
	div, unit := unitScale(scale)
	var s svgw
	s.printf(`<svg class="axis-row" width="100%%" height="20" role="img" aria-label="time since t0 in %s">`, unit)
	for i := 0; float64(i)*step <= scale*1.0001; i++ {
		v := float64(i) * step
		anchor := "middle"
		switch {
		case i == 0:
			anchor = "start"
		case v >= scale*0.97:
			anchor = "end"
		}
		s.printf(`<line class="axis" x1="%s" x2="%s" y1="14" y2="20"/>`, pct(v, scale), pct(v, scale))
		label := tickNum(v / div)
		if anchor == "end" {
			label += " " + unit
		}
		s.printf(`<text class="tick" x="%s" y="11" text-anchor="%s">%s</text>`, pct(v, scale), anchor, label)
	}
	s.WriteString(`</svg>`)
	return s.html()
}

// waterfallScale is the end of a waterfall axis for a last mark at end:
// a round number a little past it, so that bars fill most of the track.
func waterfallScale(end float64) float64 {
	top, _ := niceMax(math.Max(end, 1), 8)
	return top
}
