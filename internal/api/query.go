package api

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
)

// badRequest is a query the client got wrong; its text is shown to it.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

// badf formats a bad request's message; string arguments (parameter names
// and values from the client) are clipped to MaxEcho bytes.
func badf(format string, args ...any) error {
	for i, a := range args {
		if s, ok := a.(string); ok {
			args[i] = Clip(s, MaxEcho)
		}
	}
	return &badRequest{fmt.Sprintf(format, args...)}
}

// Query parameters of the read API. The key is never one of them (see
// KeyringResolver).
var (
	filterParams = []string{"from", "to", "since", "model", "channel", "group", "status", "label", "key_name", "stream"}
	listParams   = append(slices.Clone(filterParams), "limit", "cursor")
	statsParams  = append(slices.Clone(filterParams), "group_by", "bucket", "fields")
)

// DefaultStatsWindow is the window /api/stats summarises when the query
// names no start: a day, so that an unbounded query cannot scan the whole
// retention period by accident.
const DefaultStatsWindow = 24 * time.Hour

// MaxStatsWindow is the longest window one /api/stats call may summarise,
// whatever the retention: a summary reads every record of its window, and
// a viewer must not be able to make the gateway read years of them
// (from=1970, since=36500d). A month covers the default retention of 30
// days; longer views are several calls.
const MaxStatsWindow = 31 * 24 * time.Hour

// single returns the one value of a parameter, or an error when it is given
// more than once.
func single(q url.Values, name string) (string, error) {
	vs := q[name]
	switch len(vs) {
	case 0:
		return "", nil
	case 1:
		return vs[0], nil
	}
	return "", badf("parameter %q given %d times", name, len(vs))
}

// checkParams refuses parameters the endpoint does not know, so that a typo
// ("labels=") is an error rather than a silently unfiltered answer.
func checkParams(q url.Values, allowed []string) error {
	for name := range q {
		if !slices.Contains(allowed, name) {
			if len(allowed) == 0 {
				return badf("unknown parameter %q (this endpoint takes none)", name)
			}
			return badf("unknown parameter %q (known: %s)", name, strings.Join(allowed, ", "))
		}
	}
	return nil
}

// ParseDuration reads a Go duration ("90s", "1h30m") that may start with
// a number of days ("7d", "1d12h"), as the read API's since= takes it (and
// the dashboard's): config.ParseDuration, the same everywhere, bounded to a
// hundred years.
func ParseDuration(s string) (time.Duration, error) {
	d, err := config.ParseDuration(s)
	if err != nil || d > 36500*24*time.Hour {
		return 0, fmt.Errorf("invalid duration %q", Clip(s, MaxEcho))
	}
	return d, nil
}

// parseFilter reads the filter parameters shared by /api/requests and
// /api/stats. now anchors "since".
func parseFilter(q url.Values, now time.Time) (store.Filter, error) {
	var f store.Filter
	for _, name := range filterParams {
		if _, err := single(q, name); err != nil {
			return f, err
		}
	}
	get := q.Get // each appears at most once now
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, badf("%s: want an RFC 3339 time such as 2025-03-14T09:26:53Z, got %q", p.name, v)
			}
			*p.dst = t.UTC()
		}
	}
	if v := get("since"); v != "" {
		if !f.From.IsZero() {
			return f, badf("give from or since, not both")
		}
		d, err := ParseDuration(v)
		if err != nil || d <= 0 {
			return f, badf("since: want a positive duration such as 15m, 1h or 7d, got %q", v)
		}
		f.From = now.Add(-d).UTC()
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, badf("from (%s) must be before to (%s)", f.From.Format(time.RFC3339Nano), f.To.Format(time.RFC3339Nano))
	}
	f.Model, f.Channel, f.Group = get("model"), get("channel"), get("group")
	f.Label, f.KeyName = get("label"), get("key_name")
	if v := get("stream"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, badf("stream: want true or false, got %q", v)
		}
		f.Stream = &b
	}
	if v := get("status"); v != "" {
		if !slices.Contains(record.Statuses, v) {
			return f, badf("status: unknown status %q (known: %s)", v, strings.Join(record.Statuses, ", "))
		}
		f.Status = v
	}
	return f, nil
}

// parseList reads the parameters of GET /api/requests.
func parseList(q url.Values, now time.Time) (store.Filter, error) {
	if err := checkParams(q, listParams); err != nil {
		return store.Filter{}, err
	}
	f, err := parseFilter(q, now)
	if err != nil {
		return f, err
	}
	for _, name := range []string{"limit", "cursor"} {
		if _, err := single(q, name); err != nil {
			return f, err
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxLimit {
			return f, badf("limit: want 1 to %d, got %q", store.MaxLimit, v)
		}
		f.Limit = n
	}
	f.Cursor = q.Get("cursor")
	return f, nil
}

// parseStats reads the parameters of GET /api/stats.
func parseStats(q url.Values, now time.Time) (store.StatsQuery, error) {
	var sq store.StatsQuery
	if err := checkParams(q, statsParams); err != nil {
		return sq, err
	}
	f, err := parseFilter(q, now)
	if err != nil {
		return sq, err
	}
	if f.From.IsZero() {
		f.From = now.Add(-DefaultStatsWindow).UTC()
		if !f.To.IsZero() && !f.From.Before(f.To) {
			f.From = f.To.Add(-DefaultStatsWindow)
		}
	}
	end := f.To
	if end.IsZero() {
		end = now
	}
	if end.Sub(f.From) > MaxStatsWindow {
		return sq, badf("the window %s to %s is longer than %d days, the most /api/stats summarises at once (whatever the retention); narrow it with from and to, or since",
			f.From.Format(time.RFC3339), end.Format(time.RFC3339), int(MaxStatsWindow/(24*time.Hour)))
	}
	sq.Filter = f
	for _, name := range []string{"group_by", "bucket", "fields"} {
		if _, err := single(q, name); err != nil {
			return sq, err
		}
	}
	list := func(v string) []string {
		var out []string
		for part := range strings.SplitSeq(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
		return out
	}
	sq.GroupBy = list(q.Get("group_by"))
	for _, d := range sq.GroupBy {
		if _, ok := store.Dimensions[d]; !ok {
			known := make([]string, 0, len(store.Dimensions))
			for k := range store.Dimensions {
				known = append(known, k)
			}
			slices.Sort(known)
			return sq, badf("group_by: cannot group by %q (known: %s)", d, strings.Join(known, ", "))
		}
	}
	sq.Fields = list(q.Get("fields"))
	for _, name := range sq.Fields {
		if !slices.ContainsFunc(store.StatFields, func(f store.StatField) bool { return f.Name == name }) {
			var known []string
			for _, f := range store.StatFields {
				known = append(known, f.Name)
			}
			return sq, badf("fields: unknown field %q (known: %s)", name, strings.Join(known, ", "))
		}
	}
	if v := q.Get("bucket"); v != "" {
		d, err := ParseDuration(v)
		if err != nil || d < store.MinBucket {
			return sq, badf("bucket: want a duration of at least %v such as 1m, 1h or 1d, got %q", store.MinBucket, v)
		}
		sq.Bucket = d
		if n := end.Sub(f.From) / d; n > store.MaxStatsGroups {
			return sq, badf("bucket: %d buckets of %v in the window exceed %d; widen the bucket or narrow the window", n, d, store.MaxStatsGroups)
		}
	}
	return sq, nil
}
