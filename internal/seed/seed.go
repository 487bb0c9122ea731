// Package seed makes synthetic, realistic request records for a store: a
// gateway's traffic over a time range, across channels, models, groups and
// APIs, streaming and not, with heavy-tailed timings, the slow stages of
// SPEC.md §4 and every terminal status in plausible shares. The records are
// diagnosed by the gateway's own rules, so their labels are what the
// gateway would have written. They are for seeing the dashboard at volume
// and for benchmarks and tests; nothing in them came from a provider.
//
// Every channel they name starts with ChannelPrefix, so that in a store
// that also holds real traffic (ttfx seed writes into the zero-config
// gateway's ttfx.db by default) the dashboard's channels, and every record,
// say which are synthetic.
package seed

import (
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// ChannelPrefix starts the name of every channel of a seeded record.
const ChannelPrefix = "seed-"

// Options say what to make. Zero fields take the defaults.
type Options struct {
	Records int       // how many (default 100000)
	From    time.Time // the first record's earliest time
	To      time.Time // the last record's latest time (default now; From defaults to 7 days before)
	Seed    uint64    // the random seed: the same options make the same records
	Rules   *diagnose.Rules
}

// Generator makes the records of Options in time order. It is not safe for
// concurrent use.
type Generator struct {
	opts  Options
	rng   *rand.Rand
	i     int
	slot  float64 // ns between consecutive records
	users []string
	fleet []channel
}

// New returns a generator for o.
func New(o Options) *Generator {
	if o.Records <= 0 {
		o.Records = 100000
	}
	if o.To.IsZero() {
		o.To = time.Now()
	}
	if o.From.IsZero() || !o.From.Before(o.To) {
		o.From = o.To.Add(-7 * 24 * time.Hour)
	}
	if o.Rules == nil {
		o.Rules = diagnose.New(config.Diagnosis{})
	}
	g := &Generator{
		opts:  o,
		rng:   rand.New(rand.NewPCG(o.Seed, 0x7466_7866)),
		slot:  float64(o.To.Sub(o.From)) / float64(o.Records),
		fleet: channels(),
	}
	for range 400 {
		g.users = append(g.users, g.hex(32))
	}
	return g
}

// Len is how many records the generator makes in all.
func (g *Generator) Len() int { return g.opts.Records }

// Done reports whether every record has been made.
func (g *Generator) Done() bool { return g.i >= g.opts.Records }

// channel is one upstream of the synthetic gateway, with what it serves and
// how it behaves.
type channel struct {
	name, region, provider string
	apis                   []apiShare
	behaviour
}

// behaviour is how a channel's upstream answers.
type behaviour struct {
	headersMs, headersSig float64 // log-normal median and sigma of t2 − t1
	queueShare            float64 // share of requests queued upstream: headers ×5…×20
	firstEventMs          float64 // t3 − t2 median
	metadataFirst         float64 // share whose first events are metadata only (t4 − t3 grows)
	weight                float64
}

// apiShare is an API a channel serves, with the models it serves it with.
type apiShare struct {
	api, route string
	whole      string // the route of a non-streaming request, when it has its own
	share      float64
	models     []model
}

type model struct {
	name      string
	tps       float64 // visible tokens per second, median
	thinkMs   float64 // reasoning before the first effective event or text, median; 0 for none
	visibleTh bool    // reasoning is streamed as events (t4 at reasoning, t5 later)
}

// The fleet is made of the registered provider kinds that give an example
// (wire.Kind.Example): one channel each, serving the APIs of the families
// it has example models for. The behaviours below are the fleet's, handed
// to the channels in the kinds' order, and its models' speeds go by their
// place in the example (the first the small fast one).
var (
	behaviours = []behaviour{
		{headersMs: 320, headersSig: 0.45, queueShare: 0.01, firstEventMs: 12, weight: 0.3},
		{headersMs: 450, headersSig: 0.5, queueShare: 0.02, firstEventMs: 8, weight: 0.25},
		{headersMs: 600, headersSig: 0.55, queueShare: 0.02, firstEventMs: 5, metadataFirst: 0.06, weight: 0.18},
		{headersMs: 520, headersSig: 0.8, queueShare: 0.09, firstEventMs: 20, weight: 0.15},
		{headersMs: 380, headersSig: 0.5, queueShare: 0.02, firstEventMs: 14, weight: 0.12},
	}
	speeds = []model{
		{tps: 140},
		{tps: 62, thinkMs: 1800, visibleTh: true},
		{tps: 95, thinkMs: 2400},
		{tps: 75, thinkMs: 3800},
	}
	regions = []string{"us", "eu"}

	fleetOnce sync.Once
	fleet     []channel
)

// channels returns the fleet, built from the registry on first use (it is
// complete once the program's init functions ran).
func channels() []channel {
	fleetOnce.Do(func() {
		for _, k := range wire.Kinds() {
			ex := k.Example
			if ex.Host == "" {
				continue
			}
			ch := channel{name: ChannelPrefix + k.Name + "-main", provider: ex.Host,
				region: regions[len(fleet)%len(regions)], behaviour: behaviours[len(fleet)%len(behaviours)]}
			for _, a := range wire.APIs() {
				names := ex.Models[a.Family]
				// The APIs with a stream format of their own: not legacy
				// completions (read as chat), embeddings or model lists.
				if len(names) == 0 || string(a.Stream) != a.Name || len(a.Endpoints) == 0 || !slices.Contains(k.Families, a.Family) {
					continue
				}
				ms := make([]model, len(names))
				for i, n := range names {
					ms[i] = speeds[i%len(speeds)]
					ms[i].name = n
				}
				ch.apis = append(ch.apis, apiShare{api: a.Name, route: a.Endpoints[0].Pattern, whole: wholeRoute(a), share: 1, models: ms})
			}
			if len(ch.apis) > 0 {
				fleet = append(fleet, ch)
			}
		}
	})
	if len(fleet) == 0 {
		panic("seed: no linked provider kind gives an example channel (link internal/provider/all)")
	}
	return fleet
}

// wholeRoute is the route of a's non-streaming requests when a streams on
// a route of its own (Converse: /model/{target}/converse-stream, and
// /converse for a whole answer): its first endpoint's target names a
// streaming method, and another of its own endpoints' a whole answer.
// "": the same route serves both.
func wholeRoute(a *wire.API) string {
	const model = "m"
	if t := a.Endpoints[0].Target; t == nil {
		return ""
	} else if _, stream, err := t(model); err != nil || !stream {
		return ""
	}
	for _, ep := range a.Endpoints[1:] {
		if ep.Target == nil || ep.Path != "" {
			continue
		}
		if _, stream, err := ep.Target(model); err == nil && !stream {
			return ep.Pattern
		}
	}
	return ""
}

var (
	// backup is where failed primaries are retried.
	backup = channel{name: "seed-openrouter-backup", region: "eu", provider: "openrouter.ai",
		behaviour: behaviour{headersMs: 700, headersSig: 0.6, firstEventMs: 25}}

	groups = []struct {
		name string
		keys []string
		w    float64
	}{
		{"search", []string{"search-app", "search-batch"}, 0.45},
		{"support", []string{"support-bot"}, 0.35},
		{"labs", []string{"labs-notebook", "labs-eval"}, 0.2},
	}

	// statuses are the terminal statuses other than ok with their shares
	// of all requests (ok takes the rest, about 95 %).
	statuses = []struct {
		status string
		share  float64
	}{
		{record.StatusClientCancelled, 0.015},
		{record.StatusUpstreamHTTPError, 0.01},
		{record.StatusAuthFailed, 0.004},
		{record.StatusUpstreamConnectError, 0.003},
		{record.StatusBadRequest, 0.003},
		{record.StatusHeaderTimeout, 0.002},
		{record.StatusFirstOutputTimeout, 0.002},
		{record.StatusIdleTimeout, 0.002},
		{record.StatusUpstreamStreamError, 0.002},
		{record.StatusTruncated, 0.002},
		{record.StatusRateLimited, 0.0015},
		{record.StatusTotalTimeout, 0.001},
		{record.StatusNoChannel, 0.0005},
	}
)

// Next returns the next record. Call it only while !Done().
func (g *Generator) Next() record.Record {
	i := g.i
	g.i++
	at := g.opts.From.Add(time.Duration((float64(i) + g.rng.Float64()) * g.slot))
	r := record.Record{
		RequestID: record.NewID(at, g.rng.Uint64()),
		Timestamp: at.UTC(),
		Stream:    g.rng.Float64() < 0.85,
		Status:    record.StatusOK,
		Attempts:  []record.Attempt{},
		Diagnosis: []string{},
	}
	gr := groups[g.pick(len(groups), func(k int) float64 { return groups[k].w })]
	r.Group, r.KeyName = gr.name, gr.keys[g.rng.IntN(len(gr.keys))]
	if g.rng.Float64() < 0.3 {
		r.UserHash = g.users[g.rng.IntN(len(g.users))]
	}
	ch := g.fleet[g.pick(len(g.fleet), func(k int) float64 { return g.fleet[k].weight })]
	a := ch.apis[g.pick(len(ch.apis), func(k int) float64 { return ch.apis[k].share })]
	m := a.models[g.rng.IntN(len(a.models))]
	r.API, r.Route, r.Model = a.api, a.route, m.name
	if !r.Stream && a.whole != "" {
		r.Route = a.whole
	}
	r.Inflight = record.Inflight{Gateway: 1 + g.rng.IntN(60), Channel: 1 + g.rng.IntN(15)}

	status := record.StatusOK
	u := g.rng.Float64()
	for _, s := range statuses {
		if u < s.share {
			status = s.status
			break
		}
		u -= s.share
	}
	g.fill(&r, ch, m, status)
	g.opts.Rules.Diagnose(&r)
	if r.Diagnosis == nil {
		r.Diagnosis = []string{}
	}
	return r
}

// fill writes the timeline, tokens, events and attempts of r served by ch
// and m and ending in status.
func (g *Generator) fill(r *record.Record, ch channel, m model, status string) {
	var f timeline.Fields
	f.RequestWaitMs = timeline.SpanOf(g.logn(0.03, 0.6))
	f.AuthMs = timeline.SpanOf(g.logn(0.08, 0.4))
	f.DistributionMs = timeline.SpanOf(g.logn(0.02, 0.3))
	body := g.logn(0.3, 0.8)
	if g.rng.Float64() < 0.002 { // a client sending its body slowly
		body = g.logn(180, 0.5)
	}
	f.BodyReadMs = timeline.SpanOf(body)
	local := f.AuthMs.Add(f.DistributionMs).Add(f.BodyReadMs)
	localD, _ := local.Get()
	start := localD + g.logn(0.05, 0.5)

	switch status {
	case record.StatusAuthFailed, record.StatusBadRequest, record.StatusRateLimited, record.StatusNoChannel:
		// Refused by the gateway before any channel.
		r.Status, r.Error = status, map[string]string{
			record.StatusAuthFailed: "invalid API key", record.StatusBadRequest: "request body is not valid JSON",
			record.StatusRateLimited: "group rate limit exceeded", record.StatusNoChannel: "no channel serves this model",
		}[status]
		r.HTTPStatus = map[string]int{record.StatusAuthFailed: 401, record.StatusBadRequest: 400,
			record.StatusRateLimited: 429, record.StatusNoChannel: 503}[status]
		if status == record.StatusAuthFailed {
			r.Group, r.KeyName, r.UserHash = "", "", ""
			f.DistributionMs, f.BodyReadMs = timeline.Span{}, timeline.Span{}
		} else {
			r.Channel = ""
		}
		f.TotalHandlerMs = timeline.At(localD + g.logn(0.1, 0.5))
		r.Fields = f
		return
	}

	r.Channel, r.Region, r.Provider = ch.name, ch.region, ch.provider
	f.UpstreamStartMs = timeline.At(start)
	// A failed primary, retried on the backup channel (2 % of requests),
	// or the failure itself when it is the last attempt.
	var attempts []record.Attempt
	if status == record.StatusOK && g.rng.Float64() < 0.02 {
		failed := g.failedAttempt(ch, start)
		attempts = append(attempts, failed)
		start += g.logn(40, 0.5) // back-off and the failed try
		r.Channel, r.Region, r.Provider = backup.name, backup.region, backup.provider
		ch = channel{name: backup.name, behaviour: behaviour{headersMs: backup.headersMs, headersSig: backup.headersSig, firstEventMs: backup.firstEventMs}}
		f.UpstreamStartMs = timeline.At(start)
	}
	switch status {
	case record.StatusUpstreamConnectError:
		a := g.failedAttempt(ch, start)
		a.Status, a.Error, a.HTTPStatus, a.UpstreamHeadersMs, a.UpstreamHeadersAtMs = status, "dial tcp: connect: connection refused", 0, timeline.Span{}, timeline.Offset{}
		r.Attempts = append(attempts, a)
		r.Status, r.HTTPStatus, r.Error = status, 502, "cannot reach the upstream"
		f.TotalHandlerMs = timeline.At(start + g.logn(3, 1))
		r.Fields = f
		return
	case record.StatusHeaderTimeout:
		a := record.Attempt{Channel: ch.name, UpstreamStartMs: timeline.At(start), Status: status,
			Error: "no response headers within 60s", Role: record.RolePrimary, Outcome: record.OutcomeFailed}
		r.Attempts = append(attempts, a)
		r.Status, r.HTTPStatus, r.Error = status, 504, "no response headers within 60s"
		f.TotalHandlerMs = timeline.At(start + 60*time.Second + g.logn(0.5, 0.5))
		r.Fields = f
		return
	}

	headers := g.logn(ch.headersMs, ch.headersSig)
	if g.rng.Float64() < ch.queueShare {
		headers *= time.Duration(5 + g.rng.IntN(16))
	}
	tokensIn := int(math.Min(g.lognF(1500, 1), 120000))
	r.Tokens.Input = record.Int(tokensIn)

	if status == record.StatusUpstreamHTTPError {
		code := []int{429, 500, 503, 529}[g.rng.IntN(4)]
		t2 := start + g.logn(ch.headersMs/3, 0.6)
		a := record.Attempt{Channel: ch.name, UpstreamStartMs: timeline.At(start), UpstreamHeadersMs: timeline.SpanOf(t2 - start),
			UpstreamHeadersAtMs: timeline.At(t2), Status: status, HTTPStatus: code, Error: "upstream answered " + strconv.Itoa(code),
			Role: record.RolePrimary, Outcome: record.OutcomeFailed}
		r.Attempts = append(attempts, a)
		r.Status, r.HTTPStatus, r.Error = status, code, "upstream answered "+strconv.Itoa(code)
		r.Tokens.Input = nil
		f.UpstreamHeadersMs, f.UpstreamHeadersAtMs = a.UpstreamHeadersMs, a.UpstreamHeadersAtMs
		t6 := t2 + g.logn(1, 0.5)
		f.UpstreamDoneMs, f.TotalHandlerMs = timeline.At(t6), timeline.At(t6+g.logn(0.4, 0.5))
		r.Fields = f
		return
	}

	visible := int(math.Max(1, math.Min(g.lognF(260, 0.9), 8000)))
	tps := g.lognF(m.tps, 0.3)
	if g.rng.Float64() < 0.03 { // a degraded replica
		tps *= 0.1 + 0.1*g.rng.Float64()
	}
	gen := time.Duration(float64(visible-1) / tps * float64(time.Second))
	think := time.Duration(0)
	if m.thinkMs > 0 {
		think = g.logn(m.thinkMs, 0.8)
	}
	reasoning := 0
	if think > 0 {
		reasoning = int(float64(think) / float64(time.Second) * tps * 1.5)
	}
	tool := g.rng.Float64() < 0.08 // an action: tool-call arguments, no text

	if !r.Stream {
		// The whole answer comes with the headers.
		t2 := start + headers + think + gen
		f.UpstreamHeadersMs, f.UpstreamHeadersAtMs = timeline.SpanOf(t2-start), timeline.At(t2)
		t6 := t2 + g.logn(0.4, 0.6)
		f.UpstreamDoneMs = timeline.At(t6)
		f.TotalHandlerMs = timeline.At(t6 + g.logn(0.3, 0.5))
		f.HeadersSentMs = timeline.At(t6 + g.logn(0.1, 0.5))
		r.Tokens.Output, r.Tokens.Reasoning = record.Int(visible+reasoning), record.Int(reasoning)
		r.Tokens.Visible, r.Tokens.Source = record.Int(visible), record.TokensUsage
		r.FinishReason = "stop"
		if tool {
			r.FinishReason = "tool_calls"
		}
		r.Fields = f
		g.finish(r, attempts, ch, start, tokensIn, visible+reasoning)
		r.HTTPStatus = 200
		if status != record.StatusOK {
			g.cut(r, status, t2)
		}
		return
	}

	t2 := start + headers
	t3 := t2 + g.logn(ch.firstEventMs, 0.6)
	t4 := t3 + g.logn(2, 0.8)
	if g.rng.Float64() < ch.metadataFirst { // metadata events before any content
		t4 = t3 + g.logn(2500, 0.6)
	}
	t5 := t4
	switch {
	case m.visibleTh && think > 0: // reasoning streamed: t4 at it, text after
		t4 = t3 + g.logn(3, 0.5)
		t5 = t4 + think
	case think > 0: // hidden reasoning: nothing effective until it is done
		t4 = t3 + think
		t5 = t4 + g.logn(1, 0.5)
	}
	t6 := t5 + gen + g.logn(5, 0.5)
	f.UpstreamHeadersMs, f.UpstreamHeadersAtMs = timeline.SpanOf(headers), timeline.At(t2)
	f.FirstSSEEventMs, f.FirstResponseMs = timeline.At(t3), timeline.At(t4)
	f.HeadersSentMs = timeline.At(t3 + g.logn(0.08, 0.5))
	lag := g.logn(0.12, 0.7)
	if g.rng.Float64() < 0.001 { // a slow client's buffer full
		lag = g.logn(200, 0.5)
	}
	if !tool {
		f.FirstTextDeltaMs = timeline.At(t5)
		f.FirstTextSentMs = timeline.At(t5 + g.logn(0.05, 0.5))
		if visible > 1 {
			r.VisibleOutputTPS = timeline.RateOf(tps)
			r.InterTokenLatencyMs = timeline.SpanOf(gen / time.Duration(visible-1))
		}
	}
	// The longest silence between content events: usually a few token
	// times, sometimes a stall.
	gap := g.logn(60, 0.7)
	if g.rng.Float64() < 0.01 {
		gap = g.logn(7000, 0.4)
		t6 += gap
	}
	if gap < t6-t4 {
		f.MaxOutputGapMs = timeline.SpanOf(gap)
		f.MaxOutputGapAtMs = timeline.At(t4 + gap + time.Duration(g.rng.Float64()*float64(t6-t4-gap)))
	}
	f.UpstreamDoneMs, f.TotalHandlerMs = timeline.At(t6), timeline.At(t6+lag)
	r.Fields = f
	r.Terminal, r.FinishReason = "done", "stop"
	if tool {
		r.FinishReason = "tool_calls"
		r.Events.Tool = 10 + visible/4
		r.Tokens.Visible = record.Int(0)
	} else {
		r.Events.Text = visible
		r.Tokens.Visible = record.Int(visible)
	}
	r.Events.Metadata, r.Events.Done = 2+g.rng.IntN(3), 1
	if reasoning > 0 && m.visibleTh {
		r.Events.Reasoning = reasoning / 3
	}
	if g.rng.Float64() < 0.1 {
		r.Events.Heartbeat = 1 + g.rng.IntN(5)
	}
	r.Tokens.Output, r.Tokens.Reasoning, r.Tokens.Source = record.Int(visible+reasoning), record.Int(reasoning), record.TokensUsage
	r.HTTPStatus = 200
	g.finish(r, attempts, ch, start, tokensIn, visible+reasoning)
	if status != record.StatusOK {
		g.cut(r, status, t2)
	}
}

// finish adds the relayed attempt after the failed ones.
func (g *Generator) finish(r *record.Record, failed []record.Attempt, ch channel, start time.Duration, in, out int) {
	role := record.RolePrimary
	if len(failed) > 0 {
		role = record.RoleRetry
	}
	r.Attempts = append(failed, record.Attempt{Channel: ch.name, UpstreamStartMs: timeline.At(start),
		UpstreamHeadersMs: r.UpstreamHeadersMs, UpstreamHeadersAtMs: r.UpstreamHeadersAtMs,
		Status: record.StatusOK, HTTPStatus: 200, Role: role, Outcome: record.OutcomeWon,
		FirstResponseAtMs: r.FirstResponseMs, TokensInput: record.Int(in), TokensOutput: record.Int(out)})
}

// cut ends r early with status, somewhere after its headers (t2).
func (g *Generator) cut(r *record.Record, status string, t2 time.Duration) {
	f := &r.Fields
	end, _ := f.UpstreamDoneMs.Get()
	at := t2 + time.Duration(g.rng.Float64()*float64(end-t2))
	switch status {
	case record.StatusFirstOutputTimeout:
		at = t2 + 30*time.Second
	case record.StatusIdleTimeout:
		at += 30 * time.Second
	case record.StatusTotalTimeout:
		at = 300 * time.Second
	}
	drop := func(o *timeline.Offset) {
		if d, ok := o.Get(); ok && d > at {
			*o = timeline.Offset{}
		}
	}
	if status == record.StatusFirstOutputTimeout {
		f.FirstResponseMs, f.FirstTextDeltaMs, f.FirstTextSentMs = timeline.Offset{}, timeline.Offset{}, timeline.Offset{}
	}
	drop(&f.FirstSSEEventMs)
	drop(&f.FirstResponseMs)
	drop(&f.FirstTextDeltaMs)
	drop(&f.FirstTextSentMs)
	drop(&f.MaxOutputGapAtMs)
	if !f.MaxOutputGapAtMs.Valid() {
		f.MaxOutputGapMs = timeline.Span{}
	}
	if !f.FirstTextDeltaMs.Valid() {
		r.VisibleOutputTPS, r.InterTokenLatencyMs = timeline.Rate{}, timeline.Span{}
	}
	f.UpstreamDoneMs = timeline.At(at)
	f.TotalHandlerMs = timeline.At(at + g.logn(0.5, 0.5))
	r.Status, r.FinishReason = status, ""
	r.Tokens.Output, r.Tokens.Reasoning, r.Tokens.Visible, r.Tokens.Source = nil, nil, nil, ""
	if r.Stream {
		r.Terminal = map[string]string{record.StatusUpstreamStreamError: "error"}[status]
		if r.Terminal == "" && status != record.StatusClientCancelled {
			r.Terminal = "truncated"
		}
	}
	r.Error = map[string]string{
		record.StatusClientCancelled: "the client went away", record.StatusFirstOutputTimeout: "no first output within 30s",
		record.StatusIdleTimeout: "no event for 30s", record.StatusTotalTimeout: "total time over 300s",
		record.StatusUpstreamStreamError: "upstream sent an error event", record.StatusTruncated: "upstream closed the stream before its end",
	}[status]
	if status == record.StatusClientCancelled && !r.Stream {
		r.HTTPStatus = 0
	}
	last := &r.Attempts[len(r.Attempts)-1]
	last.Status, last.Error, last.Outcome = status, r.Error, record.OutcomeFailed
	if status == record.StatusClientCancelled {
		last.Outcome = record.OutcomeCancelled
	}
	last.FirstResponseAtMs, last.TokensOutput = f.FirstResponseMs, nil
}

// failedAttempt is a primary attempt on ch that failed with a 5xx.
func (g *Generator) failedAttempt(ch channel, start time.Duration) record.Attempt {
	t2 := start + g.logn(ch.headersMs/3, 0.5)
	return record.Attempt{Channel: ch.name, UpstreamStartMs: timeline.At(start), UpstreamHeadersMs: timeline.SpanOf(t2 - start),
		UpstreamHeadersAtMs: timeline.At(t2), Status: record.StatusUpstreamHTTPError, HTTPStatus: 503,
		Error: "upstream answered 503", Role: record.RolePrimary, Outcome: record.OutcomeFailed}
}

// logn draws a log-normal duration with the given median (ms) and sigma.
func (g *Generator) logn(medianMs, sigma float64) time.Duration {
	return time.Duration(g.lognF(medianMs, sigma) * float64(time.Millisecond))
}

func (g *Generator) lognF(median, sigma float64) float64 {
	return median * math.Exp(sigma*g.rng.NormFloat64())
}

// pick draws an index in [0, n) with the weights w.
func (g *Generator) pick(n int, w func(int) float64) int {
	total := 0.0
	for k := range n {
		total += w(k)
	}
	u := g.rng.Float64() * total
	for k := range n {
		if u -= w(k); u < 0 {
			return k
		}
	}
	return n - 1
}

func (g *Generator) hex(n int) string {
	const digits = "0123456789abcdef"
	var sb strings.Builder
	for range n {
		sb.WriteByte(digits[g.rng.IntN(16)])
	}
	return sb.String()
}
