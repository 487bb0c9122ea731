package telemetry_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// update rewrites deploy/grafana/ttfx.json from grafanaDashboard.
var update = flag.Bool("update", false, "rewrite deploy/grafana/ttfx.json from the dashboard definition")

// dashboardPath is the Grafana dashboard the repository ships (issue 17).
var dashboardPath = filepath.Join("..", "..", "deploy", "grafana", "ttfx.json")

// sel is the label matcher of every panel: the template variables.
// stream is single-valued (no "All"), so a latency panel shows streaming
// or non-streaming requests, never both: a non-streaming answer's headers
// come with its whole generation (SPEC.md §4, issue 14).
const sel = `api=~"$api",model=~"$model",channel=~"$channel",group=~"$group",stream="$stream"`

// selAll is sel without the stream matcher, for counters where mixing
// the two is meaningful (requests, errors, tokens).
const selAll = `api=~"$api",model=~"$model",channel=~"$channel",group=~"$group"`

type gPanel struct {
	ID          int             `json:"id"`
	Type        string          `json:"type"`
	Title       string          `json:"title"`
	Description string          `json:"description,omitempty"`
	Datasource  *gRef           `json:"datasource,omitempty"`
	GridPos     gGrid           `json:"gridPos"`
	FieldConfig *gFieldConfig   `json:"fieldConfig,omitempty"`
	Options     json.RawMessage `json:"options,omitempty"`
	Targets     []gTarget       `json:"targets,omitempty"`
	Collapsed   *bool           `json:"collapsed,omitempty"`
	Panels      []gPanel        `json:"panels,omitempty"`
}

type gRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gGrid struct{ H, W, X, Y int }

func (g gGrid) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"h":%d,"w":%d,"x":%d,"y":%d}`, g.H, g.W, g.X, g.Y), nil
}

type gFieldConfig struct {
	Defaults  gDefaults `json:"defaults"`
	Overrides []any     `json:"overrides"`
}

type gDefaults struct {
	Unit  string `json:"unit,omitempty"`
	Min   *int   `json:"min,omitempty"`
	Links []any  `json:"links,omitempty"`
}

type gTarget struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	LegendFormat string `json:"legendFormat,omitempty"`
	Exemplar     bool   `json:"exemplar,omitempty"`
	Datasource   *gRef  `json:"datasource,omitempty"`
}

type gVar struct {
	Name        string          `json:"name"`
	Label       string          `json:"label,omitempty"`
	Description string          `json:"description,omitempty"`
	Type        string          `json:"type"`
	Datasource  *gRef           `json:"datasource,omitempty"`
	Query       any             `json:"query"`
	Definition  string          `json:"definition,omitempty"`
	Refresh     int             `json:"refresh,omitempty"`
	IncludeAll  bool            `json:"includeAll"`
	Multi       bool            `json:"multi"`
	AllValue    string          `json:"allValue,omitempty"`
	Current     json.RawMessage `json:"current,omitempty"`
	Options     []any           `json:"options"`
	Sort        int             `json:"sort,omitempty"`
}

var ds = &gRef{Type: "prometheus", UID: "${datasource}"}

// panelSpec is one time series panel.
type panelSpec struct {
	title, desc, unit string
	w                 int
	exemplars         bool
	targets           [][2]string // expr, legend
}

// quantiles returns p50/p95/p99 targets of a histogram family over sel.
func quantiles(family string, qs ...string) [][2]string {
	if len(qs) == 0 {
		qs = []string{"0.5", "0.95", "0.99"}
	}
	var out [][2]string
	for _, q := range qs {
		out = append(out, [2]string{
			quantileExpr(q, family, sel, ""),
			"p" + strings.TrimPrefix(strings.TrimPrefix(q, "0."), "0") + legendPad(q),
		})
	}
	return out
}

// legendPad makes "0.5" read p50 and "0.05" p5.
func legendPad(q string) string {
	if len(q) == 3 { // 0.5 → "5" + "0"
		return "0"
	}
	return ""
}

// quantileExpr is the q-quantile of a histogram family over the matchers,
// grouped by the labels in by: read from the classic buckets, or — on a
// Prometheus that ingests the native histograms instead, as one started
// with --enable-feature=native-histograms does before 2.45 — from those.
func quantileExpr(q, family, matchers, by string) string {
	classicBy, nativeBy := "le", ""
	if by != "" {
		classicBy, nativeBy = "le, "+by, " by ("+by+")"
	}
	return fmt.Sprintf(`histogram_quantile(%s, sum by (%s) (rate(%s_bucket{%s}[$__rate_interval]))) or histogram_quantile(%s, sum%s (rate(%s{%s}[$__rate_interval])))`,
		q, classicBy, family, matchers, q, nativeBy, family, matchers)
}

// byChannelModel is the p95 of a family per channel and model.
func byChannelModel(family, q string) [][2]string {
	return [][2]string{{
		quantileExpr(q, family, sel, "channel, model"),
		"{{channel}} {{model}}",
	}}
}

const defTail = " Streaming or non-streaming as the stream variable says; a request without the mark is not counted (never as 0)."

// grafanaDashboard is the dashboard of deploy/grafana/ttfx.json.
func grafanaDashboard() map[string]any {
	rows := []struct {
		title  string
		panels []panelSpec
	}{
		{"Time to first X (SPEC.md §1)", []panelSpec{
			{title: "Time to upstream headers", unit: "s", exemplars: true, w: 6,
				desc:    "upstream_headers_ms = t2 − t1 of the relayed attempt: from that attempt's upstream request start (not from receipt) to the provider's response headers. Slow: network, admission, queue, region (diagnosis upstream_headers_slow)." + defTail,
				targets: quantiles("ttfx_time_to_headers_seconds")},
			{title: "Time to first SSE event", unit: "s", exemplars: true, w: 6,
				desc:    "first_sse_event_ms = t3 − t0: receipt of the request to the first non-empty SSE event (any event with data; comments and pings never count)." + defTail,
				targets: quantiles("ttfx_time_to_first_event_seconds")},
			{title: "Time to first response", unit: "s", exemplars: true, w: 6,
				desc:    "first_response_ms = t4 − t0: receipt to the first effective content or action — text, reasoning or tool-call arguments with a non-whitespace character. Slow: model queue, prefill (diagnosis first_response_slow)." + defTail,
				targets: quantiles("ttfx_time_to_first_response_seconds")},
			{title: "Time to first visible text", unit: "s", exemplars: true, w: 6,
				desc:    "first_text_delta_ms = t5 − t0: receipt to the first visible text delta (reasoning and tool arguments do not count). What a chat user waits for (diagnosis response_to_text_gap when t5 − t4 is long)." + defTail,
				targets: quantiles("ttfx_time_to_first_text_seconds")},
		}},
		{"Duration and generation", []panelSpec{
			{title: "Total handler time", unit: "s", exemplars: true, w: 8,
				desc:    "total_handler_ms = t7 − t0: receipt to the last byte written and flushed to the client, fallbacks included." + defTail,
				targets: quantiles("ttfx_request_duration_seconds")},
			{title: "Upstream duration", unit: "s", exemplars: true, w: 8,
				desc:    "t6 − t1 of the relayed attempt: the provider's share, without local phases and failed attempts." + defTail,
				targets: quantiles("ttfx_upstream_duration_seconds")},
			{title: "Longest output gap", unit: "s", exemplars: true, w: 8,
				desc:    "max_output_gap_ms: the longest wait between two consecutive content events from t4 on; heartbeats and metadata do not end a gap. Over 5 s: diagnosis generation_stalled." + defTail,
				targets: quantiles("ttfx_max_output_gap_seconds", "0.5", "0.95", "0.99")},
			{title: "Visible output speed (per stream)", unit: "none", w: 12,
				desc:    "visible_output_tps = visible output tokens / (t6 − t5) in seconds, per stream (not aggregate throughput). Low is bad: p5 is the slow tail. Under 15 with ≥ 20 tokens: diagnosis generation_slow." + defTail,
				targets: quantiles("ttfx_visible_output_tokens_per_second", "0.05", "0.5", "0.95")},
			{title: "Inter-token latency", unit: "s", w: 12,
				desc:    "inter_token_latency = (t6 − t5) / (visible output tokens − 1)." + defTail,
				targets: quantiles("ttfx_inter_token_latency_seconds")},
		}},
		{"The gateway's own time", []panelSpec{
			{title: "Relay lag", unit: "s", exemplars: true, w: 12,
				desc:    "first_text_sent_ms − first_text_delta_ms: first visible text flushed to the client minus first visible text received from the upstream. The gateway's own hold-back; should stay in microseconds." + defTail,
				targets: quantiles("ttfx_relay_lag_seconds", "0.5", "0.99")},
			{title: "Local phases (p99)", unit: "s", w: 12,
				desc: "ttfx_local_phase_seconds by phase: auth (auth_ms), distribution (distribution_ms: channel selection), body_read (body_read_ms: the client's upload), request_wait (before t0: accept and header read), after_upstream (t7 − t6). Over 100 ms in sum: diagnosis local_overhead." + defTail,
				targets: [][2]string{{
					quantileExpr("0.99", "ttfx_local_phase_seconds", sel, "phase"), "{{phase}}"}}},
		}},
		{"Per channel and model (p95)", []panelSpec{
			{title: "First visible text p95 by channel and model", unit: "s", w: 12,
				desc:    "first_text_delta_ms = t5 − t0, p95 per channel and model." + defTail,
				targets: byChannelModel("ttfx_time_to_first_text_seconds", "0.95")},
			{title: "First response p95 by channel and model", unit: "s", w: 12,
				desc:    "first_response_ms = t4 − t0, p95 per channel and model." + defTail,
				targets: byChannelModel("ttfx_time_to_first_response_seconds", "0.95")},
			{title: "Upstream headers p95 by channel and model", unit: "s", w: 12,
				desc:    "upstream_headers_ms = t2 − t1, p95 per channel and model." + defTail,
				targets: byChannelModel("ttfx_time_to_headers_seconds", "0.95")},
			{title: "Total handler time p95 by channel and model", unit: "s", w: 12,
				desc:    "total_handler_ms = t7 − t0, p95 per channel and model." + defTail,
				targets: byChannelModel("ttfx_request_duration_seconds", "0.95")},
		}},
		{"Requests, errors and diagnosis", []panelSpec{
			{title: "Requests by status", unit: "reqps", w: 8,
				desc: "ttfx_requests_total by terminal status (SPEC.md §5), streaming and non-streaming together.",
				targets: [][2]string{{
					`sum by (status) (rate(ttfx_requests_total{` + selAll + `}[$__rate_interval]))`, "{{status}}"}}},
			{title: "Error ratio by status", unit: "percentunit", w: 8,
				desc: "Share of requests that ended in each status other than ok, client_cancelled, bad_request and auth_failed (the client's doing).",
				targets: [][2]string{{
					`sum by (status) (rate(ttfx_requests_total{` + selAll + `,status!~"ok|client_cancelled|bad_request|auth_failed"}[$__rate_interval])) / ignoring (status) group_left sum(rate(ttfx_requests_total{` + selAll + `}[$__rate_interval]))`, "{{status}}"}}},
			{title: "Diagnosis labels", unit: "reqps", w: 8,
				desc: "ttfx_diagnosis_total by label: the §4 rules (upstream_headers_slow, first_response_slow, event_to_response_gap, response_to_text_gap, generation_slow, generation_stalled, local_overhead) and terminal-status verdicts. A request with several labels counts under each.",
				targets: [][2]string{{
					`sum by (label) (rate(ttfx_diagnosis_total{` + selAll + `}[$__rate_interval]))`, "{{label}}"}}},
			{title: "Error ratio by channel and model", unit: "percentunit", w: 12,
				desc: "Share of each channel's and model's requests that did not end ok (client-side statuses excluded).",
				targets: [][2]string{{
					`sum by (channel, model) (rate(ttfx_requests_total{` + selAll + `,status!~"ok|client_cancelled|bad_request|auth_failed"}[$__rate_interval])) / sum by (channel, model) (rate(ttfx_requests_total{` + selAll + `}[$__rate_interval]))`, "{{channel}} {{model}}"}}},
			{title: "Tokens by type", unit: "short", w: 12,
				desc: "ttfx_tokens_total per second by type: input, output and reasoning as the provider reported them (or estimated), visible = output − reasoning.",
				targets: [][2]string{{
					`sum by (type) (rate(ttfx_tokens_total{` + selAll + `}[$__rate_interval]))`, "{{type}}"}}},
		}},
		{"Channel health", []panelSpec{
			{title: "In flight", unit: "short", w: 8,
				desc: "ttfx_inflight_requests per channel (attempts under way) and ttfx_gateway_inflight_requests (all requests being served).",
				targets: [][2]string{
					{`sum by (channel) (ttfx_inflight_requests{channel=~"$channel"})`, "{{channel}}"},
					{`sum(ttfx_gateway_inflight_requests)`, "gateway"}}},
			{title: "Channels ejected", unit: "short", w: 8,
				desc: "ttfx_channel_ejected: 1 while outlier detection keeps a channel out of a model's route; ejections per window from ttfx_channel_ejections_total.",
				targets: [][2]string{
					{`max by (channel, model) (ttfx_channel_ejected{channel=~"$channel",model=~"$model"})`, "ejected {{channel}} {{model}}"},
					{`sum by (channel, model) (increase(ttfx_channel_ejections_total{channel=~"$channel",model=~"$model"}[$__rate_interval]))`, "ejections {{channel}} {{model}}"}}},
			{title: "Hedged attempts", unit: "short", w: 8,
				desc: "ttfx_hedges_total by outcome: started, won (the hedge's answer was relayed), lost.",
				targets: [][2]string{
					{`sum by (outcome) (rate(ttfx_hedges_total[$__rate_interval]))`, "{{outcome}}"}}},
			{title: "Route decisions", unit: "reqps", w: 24,
				desc: "ttfx_route_decisions_total: requests whose routing plan put the channel first, by the strategy that ordered it (priority, weighted, latency).",
				targets: [][2]string{
					{`sum by (strategy, channel) (rate(ttfx_route_decisions_total{channel=~"$channel"}[$__rate_interval]))`, "{{strategy}} → {{channel}}"}}},
		}},
		{"Record store and telemetry", []panelSpec{
			{title: "Store queue", unit: "short", w: 8,
				desc: "ttfx_store_queue_depth: records waiting to be written, against ttfx_store_queue_capacity (past it, records are dropped).",
				targets: [][2]string{
					{`sum(ttfx_store_queue_depth)`, "queued"},
					{`sum(ttfx_store_queue_capacity)`, "capacity"}}},
			{title: "Store writes and drops", unit: "short", w: 8,
				desc: "Records written, dropped (queue full or writer closed) and rejected per second. Any drop loses records.",
				targets: [][2]string{
					{`sum(rate(ttfx_store_written_total[$__rate_interval]))`, "written"},
					{`sum(rate(ttfx_store_dropped_total[$__rate_interval]))`, "dropped"},
					{`sum(rate(ttfx_store_rejected_total[$__rate_interval]))`, "rejected"}}},
			{title: "Telemetry queue drops", unit: "short", w: 8,
				desc: "ttfx_telemetry_dropped_total: records the request log and the OTLP export never saw because their queue was full.",
				targets: [][2]string{
					{`sum(rate(ttfx_telemetry_dropped_total[$__rate_interval]))`, "dropped"}}},
		}},
	}

	var panels []gPanel
	id, y := 1, 0
	for _, r := range rows {
		f := false
		panels = append(panels, gPanel{ID: id, Type: "row", Title: r.title, Collapsed: &f, GridPos: gGrid{H: 1, W: 24, Y: y}, Panels: []gPanel{}})
		id++
		y++
		x := 0
		for _, p := range r.panels {
			if x+p.w > 24 {
				x, y = 0, y+8
			}
			var ts []gTarget
			for i, t := range p.targets {
				ts = append(ts, gTarget{RefID: string(rune('A' + i)), Expr: t[0], LegendFormat: t[1], Exemplar: p.exemplars, Datasource: ds})
			}
			panels = append(panels, gPanel{
				ID: id, Type: "timeseries", Title: p.title, Description: p.desc, Datasource: ds,
				GridPos:     gGrid{H: 8, W: p.w, X: x, Y: y},
				FieldConfig: &gFieldConfig{Defaults: gDefaults{Unit: p.unit}, Overrides: []any{}},
				Options:     json.RawMessage(`{"legend":{"calcs":["mean","max"],"displayMode":"table","placement":"bottom","showLegend":true},"tooltip":{"mode":"multi","sort":"desc"}}`),
				Targets:     ts,
			})
			id++
			x += p.w
		}
		y += 8
	}

	all := json.RawMessage(`{"selected":true,"text":["All"],"value":["$__all"]}`)
	labelVar := func(name, def string) gVar {
		return gVar{Name: name, Type: "query", Datasource: ds, Definition: def,
			Query:   map[string]any{"query": def, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
			Refresh: 2, IncludeAll: true, Multi: true, AllValue: ".*", Current: all, Options: []any{}, Sort: 1}
	}
	vars := []gVar{
		{Name: "datasource", Label: "Prometheus", Type: "datasource", Query: "prometheus", Options: []any{},
			Current: json.RawMessage(`{}`)},
		labelVar("api", `label_values(ttfx_requests_total, api)`),
		labelVar("model", `label_values(ttfx_requests_total{api=~"$api"}, model)`),
		labelVar("channel", `label_values(ttfx_requests_total{api=~"$api",model=~"$model"}, channel)`),
		labelVar("group", `label_values(ttfx_requests_total{api=~"$api"}, group)`),
		{Name: "stream", Label: "stream", Type: "custom", Query: "true,false",
			Description: "Latency panels show streaming or non-streaming requests, never both: a non-streaming answer's headers arrive with its whole generation.",
			Current:     json.RawMessage(`{"selected":true,"text":"true","value":"true"}`),
			Options: []any{
				map[string]any{"selected": true, "text": "true", "value": "true"},
				map[string]any{"selected": false, "text": "false", "value": "false"},
			}},
	}
	return map[string]any{
		"title":         "ttfx — AI gateway latency",
		"uid":           "ttfx-gateway",
		"description":   "ttfx's Prometheus metrics: the four time-to-first definitions, durations, generation speed, local phases, statuses, diagnosis, channel health and the record store. Each panel's description states its definition (SPEC.md §1). Generated by internal/telemetry TestGrafanaDashboard -update.",
		"tags":          []string{"ttfx", "llm", "gateway"},
		"editable":      true,
		"schemaVersion": 39,
		"version":       1,
		"refresh":       "30s",
		"time":          map[string]string{"from": "now-1h", "to": "now"},
		"timezone":      "utc",
		"graphTooltip":  1,
		"templating":    map[string]any{"list": vars},
		"annotations":   map[string]any{"list": []any{}},
		"links":         []any{},
		"panels":        panels,
	}
}

// TestGrafanaDashboard keeps deploy/grafana/ttfx.json what
// grafanaDashboard builds (go test -run TestGrafanaDashboard -update
// rewrites it), and checks what makes it usable: unique panel ids, the
// five template variables, a description on every panel, and no latency
// panel that mixes streaming and non-streaming requests.
func TestGrafanaDashboard(t *testing.T) {
	want, err := json.MarshalIndent(grafanaDashboard(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(dashboardPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from grafanaDashboard(): run go test ./internal/telemetry -run TestGrafanaDashboard -update", dashboardPath)
	}

	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				IncludeAll bool   `json:"includeAll"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID          int    `json:"id"`
			Type        string `json:"type"`
			Title       string `json:"title"`
			Description string `json:"description"`
			Targets     []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(got, &d); err != nil {
		t.Fatal(err)
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Name == "stream" && v.IncludeAll {
			t.Error("the stream variable offers All: latency panels would mix streaming and non-streaming")
		}
	}
	for _, v := range []string{"api", "model", "channel", "group", "stream"} {
		if !vars[v] {
			t.Errorf("template variable %s missing", v)
		}
	}
	ids := map[int]bool{}
	latency := regexp.MustCompile(`(ttfx_(time_to_\w+|request_duration|upstream_duration|relay_lag|local_phase|max_output_gap|inter_token_latency)_seconds|ttfx_visible_output_tokens_per_second)(_bucket)?\{([^}]*)\}`)
	n := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Description == "" || len(p.Targets) == 0 {
			t.Errorf("panel %q lacks a description or a query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range latency.FindAllStringSubmatch(tg.Expr, -1) {
				n++
				if !strings.Contains(m[4], `stream="$stream"`) {
					t.Errorf("panel %q reads %s without stream=\"$stream\": streaming and non-streaming would mix", p.Title, m[1])
				}
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d latency selectors seen: the check above saw too little", n)
	}
}
