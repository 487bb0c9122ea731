package web

import (
	"embed"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

//go:embed templates
var templateFS embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"actions": func() []string { return []string{"drain", "disable", "enable", "uneject"} },
	"ms":      ms,
	"msPtr":   msPtr,
	"num":     num,
	"percent": percent,
	"tps":     tps,
	"group":   func(n int) string { return group(strconv.Itoa(n)) },
	"spanMs":  func(s timeline.Span) string { return msOffset(s.Ms()) },
	"offMs":   func(o timeline.Offset) string { return msOffset(o.Ms()) },
	"inc":     func(i int) int { return i + 1 },
	// val marks an absent value so that it reads as absent, not as a
	// number.
	"val": func(s string) template.HTML {
		if s == "absent" || strings.HasPrefix(s, "absent ") {
			return template.HTML(`<span class="absent">` + template.HTMLEscapeString(s) + `</span>`)
		}
		return template.HTML(template.HTMLEscapeString(s))
	},
}).ParseFS(templateFS, "templates/*.html"))

// ttftDef is one of the four time-to-first-X definitions (seed note, "TTFT
// has several practical meanings"); a chart always says which it shows.
type ttftDef struct {
	Field string // the §1 field
	Name  string
	Use   string // what it is good for
}

var ttftDefs = []ttftDef{
	{"upstream_headers_ms", "Time to Headers", "network and admission"},
	{"first_sse_event_ms", "Time to First Event", "transport liveness"},
	{"first_response_ms", "Time to First Effective Response", "agents and reasoning"},
	{"first_text_delta_ms", "Time to First Visible Text", "chat experience"},
}

func ttftFields() string {
	var names []string
	for _, d := range ttftDefs {
		names = append(names, d.Field)
	}
	return strings.Join(names, ",")
}

// statsResp is the part of GET /api/stats the views read.
type statsResp struct {
	api.StatsResponse
}

// filtersData feeds the filter form of a view.
type filtersData struct {
	View       string
	Q          viewQuery
	Presets    []string
	Models     []string
	Channels   []string
	Groups     []string
	GroupFixed bool // a viewer: its group is the only one
	Statuses   []string
	Labels     []string
	ShowLabel  bool
	// StreamChoices are the stream switch's options; Q.Stream is the
	// chosen one.
	StreamChoices []struct{ Value, Name string }
}

func (h *Handler) filters(view string, p auth.Principal, q viewQuery, models []string) filtersData {
	fd := filtersData{View: view, Q: q, Presets: sincePresets, Statuses: record.Statuses, Models: models,
		Groups: h.groups(p), GroupFixed: p.Role != auth.RoleAdmin, StreamChoices: streamChoices}
	for _, c := range h.visibleChannels(p) {
		fd.Channels = append(fd.Channels, c.Name)
	}
	if q.Channel != "" && !slices.Contains(fd.Channels, q.Channel) {
		fd.Channels = append(fd.Channels, q.Channel)
	}
	if q.SinceRaw != "" && !slices.Contains(fd.Presets, q.SinceRaw) {
		fd.Presets = append(slices.Clone(fd.Presets), q.SinceRaw)
	}
	fd.Labels = append(slices.Clone(diagnose.RuleLabels), record.Statuses[1:]...)
	return fd
}

// parallel runs fns at once and returns the first error. The views' store
// queries are independent reads; SQLite serves them from its read pool
// and PostgreSQL from its own, so a view costs the slowest query, not
// their sum.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func with(v url.Values, kv ...string) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

// defRow is one line of the four-definitions table.
type defRow struct {
	ttftDef
	Definition string
	S          store.FieldSummary
}

// overviewData feeds the overview.
type overviewData struct {
	Filters      filtersData
	Window       string
	Count        int
	Errors       int
	Rate         string
	Defs         []defRow
	Series       []template.HTML
	TPS          template.HTML
	TPSDef       string
	Statuses     template.HTML
	Verdicts     template.HTML
	NoVerdicts   bool
	Method       string
	Bucket       string
	RequestsLink string
	Stream       string // which requests the summaries are of
	AsOf         string // when the view was made (the live badge)
}

func (h *Handler) overview(r *http.Request, p auth.Principal, q viewQuery) ([]byte, error) {
	ctx := r.Context()
	q = q.streamDefault("true")
	filt := q.filter(false)
	bucket := bucketFor(q.end().Sub(q.start()), 60)
	var all, buckets, perModel statsResp
	err := parallel(
		func() error {
			return h.call(ctx, r, "/api/stats", with(filt, "fields", ttftFields()+",visible_output_tps"), &all)
		},
		func() error {
			return h.call(ctx, r, "/api/stats", with(filt, "fields", ttftFields(), "bucket", durText(bucket)), &buckets)
		},
		func() error {
			return h.call(ctx, r, "/api/stats", with(filt, "fields", "visible_output_tps", "group_by", "model"), &perModel)
		},
	)
	if err != nil {
		return nil, err
	}
	var g store.Group
	if len(all.Groups) > 0 {
		g = all.Groups[0]
	}
	var models []string
	for _, mg := range perModel.Groups {
		models = append(models, mg.Key["model"])
	}
	d := overviewData{
		Filters: h.filters("overview", p, q, models),
		Window:  q.windowText(),
		Count:   g.Count, Errors: g.Errors, Rate: percent(g.ErrorRate),
		Method: all.PercentileMethod, Bucket: durText(bucket),
		TPSDef:       all.Definitions["visible_output_tps"],
		RequestsLink: q.link("requests"),
		Stream:       q.streamText(), AsOf: q.asOf(),
	}
	for _, def := range ttftDefs {
		d.Defs = append(d.Defs, defRow{ttftDef: def, Definition: all.Definitions[def.Field], S: g.Fields[def.Field]})
	}

	// Time series: one chart per definition, p50 and p95 per bucket, all
	// four in one unit (that of the largest value among them), so that
	// the charts of one family read alike.
	family := 0.0
	for _, bg := range buckets.Groups {
		for _, def := range ttftDefs {
			if v := bg.Fields[def.Field].P95; v != nil {
				family = math.Max(family, *v)
			}
		}
	}
	for _, def := range ttftDefs {
		var p50, p95 []point
		for _, bg := range buckets.Groups {
			if bg.BucketStart == nil {
				continue
			}
			fs := bg.Fields[def.Field]
			p50 = append(p50, point{T: *bg.BucketStart, V: fs.P50, N: fs.Count})
			p95 = append(p95, point{T: *bg.BucketStart, V: fs.P95, N: fs.Count})
		}
		c := timeChart{
			Title: def.Name + " (" + def.Field + ")", Field: def.Field,
			From: q.start(), To: q.end(), Bucket: bucket, Loc: q.TZ, FamilyMax: family,
			Series: []series{{Name: "p50", Class: "p50", Points: p50}, {Name: "p95", Class: "p95", Points: p95}},
			Link: func(from, to time.Time) string {
				return q.link("requests", "since", "", "from", from.UTC().Format(time.RFC3339), "to", to.UTC().Format(time.RFC3339))
			},
		}
		d.Series = append(d.Series, c.SVG())
	}

	// Visible TPS: all requests, then the busiest models.
	rows := []boxRow{{Label: "all requests", S: g.Fields["visible_output_tps"], Records: g.Count}}
	mg := slices.Clone(perModel.Groups)
	sort.SliceStable(mg, func(i, j int) bool { return mg[i].Count > mg[j].Count })
	for i, m := range mg {
		if i == 12 {
			break
		}
		name := m.Key["model"]
		if name == "" {
			name = "(no model)"
		}
		rows = append(rows, boxRow{Label: name, S: m.Fields["visible_output_tps"], Records: m.Count})
	}
	d.TPS = boxPlot(rows, "visible output tokens per second (tok/s)", "visible_output_tps")

	// Statuses, ok first then by count.
	var sb []bar
	for st, n := range g.Statuses {
		cls := "err"
		if st == record.StatusOK {
			cls = "ok"
		}
		sb = append(sb, bar{Label: st, Value: n, Class: cls, Link: q.link("requests", "status", st)})
	}
	sort.Slice(sb, func(i, j int) bool {
		if (sb[i].Label == record.StatusOK) != (sb[j].Label == record.StatusOK) {
			return sb[i].Label == record.StatusOK
		}
		if sb[i].Value != sb[j].Value {
			return sb[i].Value > sb[j].Value
		}
		return sb[i].Label < sb[j].Label
	})
	if len(sb) == 0 {
		sb = append(sb, bar{Label: "no requests", Class: "none"})
	}
	d.Statuses = hbars(sb, "requests", "statuses")

	var vb []bar
	for label, lc := range g.Labels {
		vb = append(vb, bar{Label: label, Value: lc.Count, Primary: lc.Primary, Class: "verdict", Link: q.link("requests", "label", label)})
	}
	sort.Slice(vb, func(i, j int) bool {
		if vb[i].Value != vb[j].Value {
			return vb[i].Value > vb[j].Value
		}
		return vb[i].Label < vb[j].Label
	})
	if len(vb) > 10 {
		vb = vb[:10]
	}
	d.NoVerdicts = len(vb) == 0
	if !d.NoVerdicts {
		d.Verdicts = hbars(vb, "requests carrying the verdict (dark: as the primary verdict)", "verdicts")
	}
	return render("overview", d)
}

// reqRow is one line of the request list.
type reqRow struct {
	ID        string
	Link      string
	Time      string
	Date      string
	Model     string
	Channel   string
	Group     string
	Status    string
	OK        bool
	Verdict   string
	More      int // further verdicts
	Waterfall template.HTML
	FirstText string
	Total     string
}

// requestsData feeds the request list.
type requestsData struct {
	Filters filtersData
	Window  string
	Rows    []reqRow
	Scale   string
	Next    string // link to the next (older) page; "" on the last
	First   string // link to the newest page; "" on it
	Live    bool
	Limit   int
	Legend  []legendItem
	AsOf    string // when the view was made (the live badge)
}

type legendItem struct{ Class, Text string }

var waterfallLegend = []legendItem{
	{"seg-t1", "local"}, {"seg-t2", "to headers"}, {"seg-t3", "to first event"},
	{"seg-t4", "to first response"}, {"seg-t5", "response → text"}, {"seg-t6", "generation"}, {"seg-t7", "tail"},
}

func (h *Handler) requests(r *http.Request, p auth.Principal, q viewQuery) ([]byte, error) {
	q = q.streamDefault("any")
	v := q.filter(true)
	v.Set("limit", strconv.Itoa(q.Limit))
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var list api.ListResponse
	if err := h.call(r.Context(), r, "/api/requests", v, &list); err != nil {
		return nil, err
	}
	scale := 1.0
	for i := range list.Requests {
		scale = math.Max(scale, endMs(&list.Requests[i]))
	}
	scale = waterfallScale(scale)
	d := requestsData{Filters: h.filters("requests", p, q, nil), Window: q.windowText(), Live: q.Cursor == "",
		Limit: q.Limit, Legend: waterfallLegend, Scale: ms(scale), AsOf: q.asOf()}
	d.Filters.ShowLabel = true
	for i := range list.Requests {
		rec := &list.Requests[i]
		row := reqRow{
			ID: rec.RequestID, Link: "#/request/" + url.PathEscape(rec.RequestID),
			Time: rec.Timestamp.In(q.TZ).Format("15:04:05"), Date: rec.Timestamp.In(q.TZ).Format("2006-01-02 15:04:05.000 ") + q.TZ.String(),
			Model: rec.Model, Channel: rec.Channel, Group: rec.Group, Status: rec.Status, OK: rec.Status == record.StatusOK,
			Waterfall: miniWaterfall(rec, scale),
			FirstText: msOffset(rec.FirstTextDeltaMs.Ms()), Total: msOffset(rec.TotalHandlerMs.Ms()),
		}
		if len(rec.Diagnosis) > 0 {
			row.Verdict, row.More = rec.Diagnosis[0], len(rec.Diagnosis)-1
		}
		d.Rows = append(d.Rows, row)
	}
	if list.NextCursor != nil {
		d.Next = q.link("requests", "cursor", *list.NextCursor)
	}
	if q.Cursor != "" {
		d.First = q.link("requests")
	}
	return render("requests", d)
}

func msOffset(v float64, ok bool) string {
	if !ok {
		return "absent"
	}
	return ms(v)
}

// channelRow is one channel and model of the Channels view.
type channelRow struct {
	Channel, Model string
	Count          int
	ErrorRate      string
	Errors         int
	Cells          []channelCell
	Inflight       string
	Link           string
}

type channelCell struct {
	P50, P95 string
	Worst    bool // the highest p95 of its column (of two or more rows), by a margin that matters
	Count    int
}

// A column's highest p95 is marked only when it stands apart from the
// lowest by both floors: 1 ms between two channels is noise, and so is
// 8 % of a few seconds.
const (
	worstRelFloor = 0.20 // the highest p95 is at least 20 % over the lowest
	worstAbsFloor = 50.0 // and at least 50 ms over it
)

// worstMatters reports whether a column whose p95 run from lo to hi (ms)
// has a worst worth marking.
func worstMatters(lo, hi float64) bool {
	return hi > 0 && hi-lo >= worstAbsFloor && hi >= lo*(1+worstRelFloor)
}

// noChannelRow sums the requests that never reached a channel.
type noChannelRow struct {
	Count, Errors int
	ErrorRate     string
	Statuses      []statusCount // most frequent first
	counts        map[string]int
}

type statusCount struct {
	Status string
	Count  int
}

func (r *noChannelRow) add(g store.Group) *noChannelRow {
	if r == nil {
		r = &noChannelRow{counts: map[string]int{}}
	}
	r.Count += g.Count
	r.Errors += g.Errors
	for st, n := range g.Statuses {
		r.counts[st] += n
	}
	return r
}

func (r *noChannelRow) finish() {
	if r.Count > 0 {
		r.ErrorRate = percent(float64(r.Errors) / float64(r.Count))
	}
	for st, n := range r.counts {
		r.Statuses = append(r.Statuses, statusCount{st, n})
	}
	slices.SortFunc(r.Statuses, func(a, b statusCount) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		return strings.Compare(a.Status, b.Status)
	})
}

// channelsData feeds the Channels view.
type channelsData struct {
	Filters  filtersData
	Window   string
	Defs     []ttftDef
	Rows     []channelRow
	Channels []Channel
	Admin    bool // the operator's actions are offered
	Method   string
	Stream   string // which requests the table is of
	AsOf     string // when the view was made (the live badge)
	// NoModel counts the requests left out of the table because they name
	// no model (GET /v1/models, requests refused before a model was read):
	// they have no latency of a model to compare.
	NoModel int
	// NoChannel is the requests that never reached a channel (a refused
	// key, an unknown model), with their statuses; nil without any.
	NoChannel *noChannelRow
	Health    []healthRow // live, from the router; nil without one
	Routes    []routeRow  // admins only
}

func (h *Handler) channels(r *http.Request, p auth.Principal, q viewQuery) ([]byte, error) {
	q = q.streamDefault("true")
	var st statsResp
	v := with(q.filter(false), "fields", ttftFields(), "group_by", "channel,model")
	if err := h.call(r.Context(), r, "/api/stats", v, &st); err != nil {
		return nil, err
	}
	chans := h.visibleChannels(p)
	inflight := map[string]int64{}
	for _, c := range chans {
		inflight[c.Name] = c.Inflight
	}
	d := channelsData{Filters: h.filters("channels", p, q, nil), Window: q.windowText(), Defs: ttftDefs, Channels: chans, Admin: p.Role == auth.RoleAdmin,
		Method: st.PercentileMethod, Stream: q.streamText(), AsOf: q.asOf()}
	d.Health, d.Routes = h.routing(p, chans)
	worst := make([]float64, len(ttftDefs))
	best := make([]float64, len(ttftDefs))
	groups := st.Groups[:0:0]
	for _, g := range st.Groups {
		switch {
		case g.Key["channel"] == "":
			// Requests that never reached a channel (refused keys,
			// unknown models): one row of their own, at the bottom.
			d.NoChannel = d.NoChannel.add(g)
		case g.Key["model"] == "":
			d.NoModel += g.Count
		default:
			groups = append(groups, g)
		}
	}
	if d.NoChannel != nil {
		d.NoChannel.finish()
	}
	for _, g := range groups {
		row := channelRow{Channel: g.Key["channel"], Model: g.Key["model"], Count: g.Count, Errors: g.Errors,
			ErrorRate: percent(g.ErrorRate), Inflight: "not configured",
			Link: q.link("requests", "channel", g.Key["channel"], "model", g.Key["model"])}
		if n, ok := inflight[row.Channel]; ok {
			row.Inflight = strconv.FormatInt(n, 10)
		}
		for i, def := range ttftDefs {
			fs := g.Fields[def.Field]
			row.Cells = append(row.Cells, channelCell{P50: msPtr(fs.P50), P95: msPtr(fs.P95), Count: fs.Count})
			if fs.P95 != nil {
				if worst[i] == 0 || *fs.P95 > worst[i] {
					worst[i] = *fs.P95
				}
				if best[i] == 0 || *fs.P95 < best[i] {
					best[i] = *fs.P95
				}
			}
		}
		d.Rows = append(d.Rows, row)
	}
	if len(d.Rows) > 1 {
		for ri, g := range groups {
			for i, def := range ttftDefs {
				if p95 := g.Fields[def.Field].P95; p95 != nil && *p95 == worst[i] && worstMatters(best[i], worst[i]) {
					d.Rows[ri].Cells[i].Worst = true
				}
			}
		}
	}
	return render("channels", d)
}
