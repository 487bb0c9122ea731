package web

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/api"

	"github.com/ttfx/ttfx/internal/record"
)

// viewQuery is what a view was asked for: a time window, filters, a page.
// The browser passes the parameters of its location's hash through, plus
// tz, its offset from UTC.
type viewQuery struct {
	SinceRaw string        // as given ("1h"); empty when From is set
	Since    time.Duration // window length back from now; 0 when From is set
	From, To time.Time     // explicit bounds; zero when not given

	Model, Channel, Group, Status, Label string

	// Stream is "true" (streaming requests only), "false" (non-streaming
	// only) or "any"; "" until a view applies its default (streamDefault).
	// A non-streaming request's headers come with its whole answer, so the
	// summaries keep the two apart (SPEC.md §4).
	Stream string

	Cursor string
	Limit  int

	TZ  *time.Location // the browser's zone (a fixed offset)
	Now time.Time
}

// viewParams are the parameters a view accepts.
var viewParams = []string{"since", "from", "to", "model", "channel", "group", "status", "label", "stream", "cursor", "limit", "tz"}

// streamChoices are the values of the stream switch, with their names.
var streamChoices = []struct{ Value, Name string }{
	{"true", "streaming"}, {"false", "non-streaming"}, {"any", "both"},
}

// Bounds of a view query.
const (
	defaultSince = time.Hour
	maxSince     = api.MaxStatsWindow // the read API summarises no longer a window
	defaultLimit = 50
	maxLimit     = 200 // rows a page shows, each with its waterfall
	maxValueLen  = 256
)

// sincePresets are the windows the range picker offers.
var sincePresets = []string{"5m", "15m", "1h", "6h", "24h", "7d", "30d"}

// parseViewQuery reads and checks a view's parameters. Unknown ones are an
// error, as in the read API, so that a typo does not silently widen a view.
func parseViewQuery(v url.Values, now time.Time) (viewQuery, error) {
	q := viewQuery{Now: now.UTC(), TZ: time.FixedZone(zoneName(0), 0), Limit: defaultLimit}
	for name, vs := range v {
		if !slices.Contains(viewParams, name) {
			return q, fmt.Errorf("unknown parameter %q (known: %s)", api.Clip(name, api.MaxEcho), strings.Join(viewParams, ", "))
		}
		if len(vs) > 1 {
			return q, fmt.Errorf("parameter %q given %d times", name, len(vs))
		}
		if len(vs[0]) > maxValueLen {
			return q, fmt.Errorf("parameter %q is longer than %d bytes", name, maxValueLen)
		}
	}
	get := v.Get
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		if s := get(p.name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return q, fmt.Errorf("%s: want an RFC 3339 time such as 2025-03-14T09:26:53Z, got %q", p.name, s)
			}
			*p.dst = t.UTC()
		}
	}
	if s := get("since"); s != "" {
		if !q.From.IsZero() {
			return q, fmt.Errorf("give from or since, not both")
		}
		d, err := api.ParseDuration(s)
		if err != nil || d < time.Minute || d > maxSince {
			return q, fmt.Errorf("since: want a duration from 1m to %dd such as 15m, 1h or 7d, got %q", int(maxSince.Hours()/24), s)
		}
		q.SinceRaw, q.Since = s, d
	}
	if q.From.IsZero() && q.Since == 0 {
		q.SinceRaw, q.Since = "1h", defaultSince
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, fmt.Errorf("from must be before to")
	}
	if !q.From.IsZero() && q.To.IsZero() && !q.From.Before(q.Now) {
		return q, fmt.Errorf("from (%s) is not in the past; give to as well for a window ahead of now", q.From.Format(time.RFC3339))
	}
	if !q.start().Before(q.end()) {
		return q, fmt.Errorf("the window ends (%s) before it starts (%s)", q.end().Format(time.RFC3339), q.start().Format(time.RFC3339))
	}
	if q.end().Sub(q.start()) > maxSince {
		return q, fmt.Errorf("the window %s – %s is longer than %dd", q.start().Format(time.RFC3339), q.end().Format(time.RFC3339), int(maxSince.Hours()/24))
	}
	q.Model, q.Channel, q.Group, q.Label = get("model"), get("channel"), get("group"), get("label")
	if s := get("status"); s != "" {
		if !slices.Contains(record.Statuses, s) {
			return q, fmt.Errorf("status: unknown status %q (known: %s)", s, strings.Join(record.Statuses, ", "))
		}
		q.Status = s
	}
	switch s := get("stream"); s {
	case "", "true", "false", "any":
		q.Stream = s
	default:
		return q, fmt.Errorf("stream: want true, false or any, got %q", s)
	}
	q.Cursor = get("cursor")
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return q, fmt.Errorf("limit: want 1 to %d, got %q", maxLimit, s)
		}
		q.Limit = n
	}
	if s := get("tz"); s != "" {
		// Minutes east of UTC, as the browser's -getTimezoneOffset().
		m, err := strconv.Atoi(s)
		if err != nil || m < -14*60 || m > 14*60 {
			return q, fmt.Errorf("tz: want minutes east of UTC from -840 to 840, got %q", s)
		}
		q.TZ = time.FixedZone(zoneName(m), m*60)
	}
	return q, nil
}

// zoneName writes an offset as UTC±hh:mm.
func zoneName(minutes int) string {
	sign := '+'
	if minutes < 0 {
		sign, minutes = '-', -minutes
	}
	return fmt.Sprintf("UTC%c%02d:%02d", sign, minutes/60, minutes%60)
}

// start and end are the window's bounds.
func (q viewQuery) start() time.Time {
	if !q.From.IsZero() {
		return q.From
	}
	return q.Now.Add(-q.Since)
}

func (q viewQuery) end() time.Time {
	if !q.To.IsZero() {
		return q.To
	}
	return q.Now
}

// window returns the API parameters of the time window.
func (q viewQuery) window() url.Values {
	v := url.Values{}
	if !q.From.IsZero() {
		v.Set("from", q.From.Format(time.RFC3339Nano))
	} else {
		// An absolute start, so that every call of one view covers the same
		// records even when they run a moment apart.
		v.Set("from", q.start().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.Format(time.RFC3339Nano))
	}
	return v
}

// streamDefault returns q with its stream switch set to def when the
// caller left it unset: the summaries (overview, channels) show streaming
// requests unless asked otherwise, the request list both.
func (q viewQuery) streamDefault(def string) viewQuery {
	if q.Stream == "" {
		q.Stream = def
	}
	return q
}

// filter returns the API parameters of the window and the filters; label
// only when withLabel (the request list filters by it, the charts do not).
func (q viewQuery) filter(withLabel bool) url.Values {
	v := q.window()
	for k, s := range map[string]string{"model": q.Model, "channel": q.Channel, "group": q.Group, "status": q.Status} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Stream == "true" || q.Stream == "false" {
		v.Set("stream", q.Stream)
	}
	if withLabel && q.Label != "" {
		v.Set("label", q.Label)
	}
	return v
}

// link returns the hash location of a view with this query's range and
// filters, changed by set (name, value pairs; an empty value removes).
func (q viewQuery) link(view string, set ...string) string {
	v := url.Values{}
	if q.SinceRaw != "" {
		v.Set("since", q.SinceRaw)
	}
	if !q.From.IsZero() {
		v.Set("from", q.From.Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.Format(time.RFC3339Nano))
	}
	for k, s := range map[string]string{"model": q.Model, "channel": q.Channel, "group": q.Group, "status": q.Status, "label": q.Label, "stream": q.Stream} {
		if s != "" {
			v.Set(k, s)
		}
	}
	for i := 0; i+1 < len(set); i += 2 {
		if set[i+1] == "" {
			v.Del(set[i])
		} else {
			v.Set(set[i], set[i+1])
		}
	}
	if v.Has("from") {
		v.Del("since")
	}
	if s := v.Encode(); s != "" {
		return "#/" + view + "?" + s
	}
	return "#/" + view
}

// streamText names the stream switch's choice for a person.
func (q viewQuery) streamText() string {
	switch q.Stream {
	case "true":
		return "streaming requests"
	case "false":
		return "non-streaming requests"
	}
	return "streaming and non-streaming requests"
}

// asOf is when the view was made, on the gateway's clock and in the format
// of the request list's times, for the live badge.
func (q viewQuery) asOf() string { return q.Now.In(q.TZ).Format("15:04:05") + " " + q.TZ.String() }

// windowText describes the window for a person.
func (q viewQuery) windowText() string {
	const layout = "2006-01-02 15:04:05"
	if q.From.IsZero() {
		return "last " + q.SinceRaw + " (since " + q.start().In(q.TZ).Format(layout) + " " + q.TZ.String() + ")"
	}
	end := "now"
	if !q.To.IsZero() {
		end = q.To.In(q.TZ).Format(layout)
	}
	return q.From.In(q.TZ).Format(layout) + " – " + end + " " + q.TZ.String()
}
