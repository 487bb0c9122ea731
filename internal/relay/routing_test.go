package relay_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/testenv"
)

// routedGateway starts a gateway over real loopback HTTP whose router has
// routes.
func routedGateway(t testing.TB, routes []*route.Route, chans ...*route.Channel) (*httptest.Server, *records, *route.Router) {
	t.Helper()
	recs := newRecords()
	keys := auth.NewKeyring([]auth.Entry{{Principal: auth.Principal{Name: "client", Role: auth.RoleClient, Group: "g"}, Hash: auth.HashKey(clientKey)}})
	rt := route.New(chans, route.Options{Routes: routes, Seed: 7})
	g := relay.New(relay.Options{Router: rt, Keys: keys, Recorder: recs, UserHashKey: []byte("0123456789abcdef")})
	mux := http.NewServeMux()
	g.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, recs, rt
}

// one runs c through the gateway and returns its record.
func one(t *testing.T, gw *httptest.Server, recs *records, c call) record.Record {
	t.Helper()
	resp, _ := do(t, gw.URL, clientKey, c)
	return recs.get(t, resp.Header.Get("X-Request-Id"))
}

func attemptChannels(rec record.Record) []string {
	var out []string
	for _, a := range rec.Attempts {
		out = append(out, a.Channel)
	}
	return out
}

func msOrZero(o interface{ Ms() (float64, bool) }) float64 {
	v, _ := o.Ms()
	return v
}

// TestLatencyStrategyFirstText: one channel answers its headers at once
// and its first text late, the other its headers later and its text
// early. Ranked by first_text the second wins most requests, though its
// headers are slower; ranked by first_response with a tool call first on
// the first channel, the first channel wins. Each channel's own p50 is
// measured from the records, and the assertion is that traffic went to the
// lower one.
func TestLatencyStrategyFirstText(t *testing.T) {
	// quick-headers: headers at 5 ms, a tool call's arguments at 60 ms,
	// text at 300 ms. slow-headers: headers at 120 ms, text at 150 ms.
	quick, _ := upstream(t, map[string]sim.Profile{"m": {HeadersMs: 5, FirstEventMs: 5, ToolMs: sim.Ms(60), TextMs: sim.Ms(300), VisibleTokens: 5, TPS: 200}})
	slow, _ := upstream(t, map[string]sim.Profile{"m": {HeadersMs: 120, FirstEventMs: 120, TextMs: sim.Ms(150), VisibleTokens: 5, TPS: 200}})
	for _, tc := range []struct {
		def  route.Definition
		want string // the channel with the lower p50 of def
	}{
		{route.DefFirstText, "slow-headers"},
		{route.DefFirstResponse, "quick-headers"},
	} {
		t.Run(string(tc.def), func(t *testing.T) {
			rt := &route.Route{Models: []string{"m"}, Strategy: route.StrategyLatency,
				Latency: route.LatencyPolicy{Definition: tc.def, Percentile: 0.5, Explore: 0.05}}
			// The priority favours the channel that should lose.
			a := channel("quick-headers", "anthropic", quick.URL, fastTimeouts)
			b := channel("slow-headers", "anthropic", slow.URL, fastTimeouts)
			if tc.want == "quick-headers" {
				a.Priority = 1
			} else {
				b.Priority = 1
			}
			gw, recs, _ := routedGateway(t, []*route.Route{rt}, a, b)
			const n = 30
			first := map[string]int{}
			field := map[string][]float64{} // the definition's field, from each attempt's t1
			headers := map[string][]float64{}
			for i := range n {
				rec := one(t, gw, recs, call{api: "anthropic", model: "m", stream: true})
				if rec.Status != record.StatusOK || len(rec.Attempts) != 1 {
					t.Fatalf("request %d: status %s, attempts %v", i, rec.Status, attemptChannels(rec))
				}
				start := msOrZero(rec.Attempts[0].UpstreamStartMs)
				v := msOrZero(rec.FirstTextDeltaMs) - start
				if tc.def == route.DefFirstResponse {
					v = msOrZero(rec.FirstResponseMs) - start
				}
				field[rec.Channel] = append(field[rec.Channel], v)
				headers[rec.Channel] = append(headers[rec.Channel], msOrZero(rec.UpstreamHeadersMs))
				if i >= 6 { // a cold start: the first samples of each channel
					first[rec.Channel]++
				}
			}
			p50 := func(c string) float64 { s := slices.Clone(field[c]); slices.Sort(s); return s[len(s)/2] }
			lose := "quick-headers"
			if tc.want == lose {
				lose = "slow-headers"
			}
			if len(field[lose]) == 0 || len(field[tc.want]) == 0 {
				t.Fatalf("a channel got no request: %v", first)
			}
			if p50(tc.want) >= p50(lose) {
				t.Fatalf("measured %s p50: %s %.0f ms, %s %.0f ms — the profiles do not rank as the test assumes", tc.def, tc.want, p50(tc.want), lose, p50(lose))
			}
			hw, hl := slices.Clone(headers[tc.want]), slices.Clone(headers[lose])
			slices.Sort(hw)
			slices.Sort(hl)
			t.Logf("%s: measured p50 %s %.0f ms (headers p50 %.0f) vs %s %.0f ms (headers p50 %.0f); after warm-up %v of %d",
				tc.def, tc.want, p50(tc.want), hw[len(hw)/2], lose, p50(lose), hl[len(hl)/2], first, n-6)
			// Explore is 5 %: of 24 requests, allow a few elsewhere.
			if first[tc.want] < (n-6)*8/10 {
				t.Errorf("after warm-up %s got %d of %d requests, want ≥ 80 %% (%v)", tc.want, first[tc.want], n-6, first)
			}
		})
	}
}

// outage serves a simulator, or 503 for every request while down.
type outage struct {
	down atomic.Bool
	h    http.Handler
	hits atomic.Int64
}

func (o *outage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.hits.Add(1)
	if o.down.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"down"}}`))
		return
	}
	o.h.ServeHTTP(w, r)
}

// TestEjectionAndRecovery: a priority-0 channel that answers 503 is
// ejected after three failures in a row, skipped (and named in
// skipped_ejected) for the back-off, probed when it ends, ejected again for
// twice as long when the probe fails, and readmitted by a probe once it
// recovers. Times come from the records' own timestamps.
func TestEjectionAndRecovery(t *testing.T) {
	prof := map[string]sim.Profile{"m": {HeadersMs: 5, TextMs: sim.Ms(10), VisibleTokens: 3, TPS: 500}}
	bad := &outage{h: sim.New(sim.Options{Profiles: prof})}
	bad.down.Store(true)
	badSrv := httptest.NewServer(bad)
	t.Cleanup(badSrv.Close)
	good, _ := upstream(t, prof)
	const base = 400 * time.Millisecond
	rt := &route.Route{Models: []string{"m"}, Strategy: route.StrategyPriority,
		Eject: &route.EjectPolicy{ConsecutiveFailures: 3, Base: base, Max: 4 * base}}
	b := channel("bad", "anthropic", badSrv.URL, fastTimeouts)
	g := channel("good", "anthropic", good.URL, fastTimeouts)
	g.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, b, g)
	c := call{api: "anthropic", model: "m", stream: true}
	ejected := func() bool {
		for _, e := range router.Ejections() {
			if e.Channel == "bad" {
				return e.Ejected
			}
		}
		return false
	}

	var ejectedAt time.Time // t0 of the request whose failure ejected it
	for i := range 3 {
		rec := one(t, gw, recs, c)
		if got := attemptChannels(rec); !slices.Equal(got, []string{"bad", "good"}) || rec.Status != record.StatusOK {
			t.Fatalf("request %d: attempts %v status %s, want bad then good", i, got, rec.Status)
		}
		if len(rec.SkippedEjected) != 0 {
			t.Fatalf("request %d skipped %v before any ejection", i, rec.SkippedEjected)
		}
		ejectedAt = rec.Timestamp
	}
	if !ejected() {
		t.Fatal("bad is not ejected after 3 consecutive 503s")
	}
	// waitProbe sends requests until one tries bad again; every request
	// before it must have skipped bad as ejected.
	waitProbe := func(what string) record.Record {
		t.Helper()
		for range 400 {
			rec := one(t, gw, recs, c)
			if slices.Contains(attemptChannels(rec), "bad") {
				if rec.Attempts[0].Channel != "bad" {
					t.Fatalf("%s: the probe is not the first attempt: %v", what, attemptChannels(rec))
				}
				return rec
			}
			if !slices.Equal(rec.SkippedEjected, []string{"bad"}) || !slices.Equal(attemptChannels(rec), []string{"good"}) {
				t.Fatalf("%s: while ejected: skipped %v attempts %v", what, rec.SkippedEjected, attemptChannels(rec))
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("%s: bad was never probed", what)
		return record.Record{}
	}
	probe := waitProbe("first back-off")
	gap := probe.Timestamp.Sub(ejectedAt)
	// The ejection began during the ejecting request, after its t0: the
	// probe's t0 (plus its few µs of planning) is at least base later.
	if gap < base-5*time.Millisecond {
		t.Errorf("probed %v after the ejecting request, before the back-off of %v", gap, base)
	}
	t.Logf("first probe %v after the ejecting request (back-off %v); attempts %v", gap, base, attemptChannels(probe))
	if probe.Attempts[0].Outcome != record.OutcomeFailed || !ejected() {
		t.Fatalf("a failed probe must eject again: outcome %s ejected %v", probe.Attempts[0].Outcome, ejected())
	}
	// The second ejection is twice as long.
	bad.down.Store(false)
	probe2 := waitProbe("second back-off")
	gap2 := probe2.Timestamp.Sub(probe.Timestamp)
	if gap2 < 2*base-5*time.Millisecond {
		t.Errorf("second probe %v after the first, want ≥ %v", gap2, 2*base)
	}
	t.Logf("second probe %v after the first (back-off %v)", gap2, 2*base)
	if probe2.Status != record.StatusOK || probe2.Channel != "bad" || len(probe2.Attempts) != 1 {
		t.Fatalf("the probe of the recovered channel: status %s channel %s attempts %v", probe2.Status, probe2.Channel, attemptChannels(probe2))
	}
	if ejected() {
		t.Fatal("bad is still ejected after a successful probe")
	}
	// Readmitted: priority 0 again, nothing skipped.
	rec := one(t, gw, recs, c)
	if rec.Channel != "bad" || len(rec.SkippedEjected) != 0 {
		t.Fatalf("after readmission: channel %s skipped %v", rec.Channel, rec.SkippedEjected)
	}
	var total uint64
	for _, e := range router.Ejections() {
		if e.Channel == "bad" {
			total = e.Ejections
		}
	}
	if total != 2 {
		t.Errorf("ejections of bad = %d, want 2", total)
	}
}

// TestEjectionNeverEmpties: when every channel of a route is ejected, the
// one whose ejection ends first is still tried.
func TestEjectionNeverEmpties(t *testing.T) {
	prof := map[string]sim.Profile{"m": {HeadersMs: 1, TextMs: sim.Ms(2), VisibleTokens: 2, TPS: 500, Fault: "status:503"}}
	up, _ := upstream(t, prof)
	rt := &route.Route{Models: []string{"m"}, Eject: &route.EjectPolicy{ConsecutiveFailures: 1, Base: time.Minute, Max: time.Hour}}
	gw, recs, _ := routedGateway(t, []*route.Route{rt}, channel("a", "anthropic", up.URL, fastTimeouts), channel("b", "anthropic", up.URL, fastTimeouts))
	c := call{api: "anthropic", model: "m", stream: true}
	first := one(t, gw, recs, c) // fails on both: both ejected, a first
	if len(first.Attempts) != 2 {
		t.Fatalf("first request attempts %v", attemptChannels(first))
	}
	rec := one(t, gw, recs, c)
	if len(rec.Attempts) != 1 || len(rec.SkippedEjected) != 1 || rec.Attempts[0].Channel == rec.SkippedEjected[0] {
		t.Fatalf("all ejected: attempts %v skipped %v, want one tried and the other skipped", attemptChannels(rec), rec.SkippedEjected)
	}
	if rec.Attempts[0].Channel != first.Attempts[0].Channel {
		t.Errorf("tried %s, want %s, whose ejection ends first", rec.Attempts[0].Channel, first.Attempts[0].Channel)
	}
	if rec.Status != record.StatusUpstreamHTTPError || rec.HTTPStatus != 503 {
		t.Errorf("status %s %d, want the upstream's 503", rec.Status, rec.HTTPStatus)
	}
}

// streamTimes sends c and returns when the response's first body byte
// arrived, the body, and the record.
func streamTimes(t testing.TB, gw *httptest.Server, recs *records, c call) (time.Time, []byte, record.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(c.request(ctx, gw.URL, clientKey))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body []byte
	buf := make([]byte, 32<<10)
	var firstByte time.Time
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 && firstByte.IsZero() {
			firstByte = time.Now()
		}
		body = append(body, buf[:n]...)
		if err != nil {
			break
		}
	}
	return firstByte, body, recs.get(t, resp.Header.Get("X-Request-Id"))
}

// TestHedgeWins: the primary's first output stalls; after the hedge delay a
// hedge on the second channel starts, reaches first output and is relayed
// byte for byte, and the primary's upstream sees its cancel at once.
func TestHedgeWins(t *testing.T) {
	var mu sync.Mutex
	var slowInfo []sim.Info
	slowProf := map[string]sim.Profile{"m": {HeadersMs: 5, FirstEventMs: 5, TextMs: sim.Ms(3000), VisibleTokens: 5, TPS: 200}}
	fastProf := map[string]sim.Profile{"m": {HeadersMs: 20, FirstEventMs: 20, TextMs: sim.Ms(60), VisibleTokens: 20, TPS: 400}}
	slowSrv := httptest.NewServer(sim.New(sim.Options{Profiles: slowProf, OnRequest: func(i sim.Info) { mu.Lock(); slowInfo = append(slowInfo, i); mu.Unlock() }}))
	t.Cleanup(slowSrv.Close)
	fast, _ := upstream(t, fastProf)
	const after = 200 * time.Millisecond
	rt := &route.Route{Models: []string{"m"}, Hedge: &route.HedgePolicy{After: after, MaxShare: 1}}
	fastCh := channel("fast", "anthropic", fast.URL, fastTimeouts)
	fastCh.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("stalls", "anthropic", slowSrv.URL, fastTimeouts), fastCh)
	c := call{api: "anthropic", model: "m", stream: true}

	firstByte, body, rec := streamTimes(t, gw, recs, c)
	if rec.Status != record.StatusOK || rec.Channel != "fast" || len(rec.Attempts) != 2 {
		t.Fatalf("status %s channel %s attempts %+v", rec.Status, rec.Channel, rec.Attempts)
	}
	won, lost := rec.Attempts[0], rec.Attempts[1]
	if won.Channel != "fast" || won.Role != record.RoleHedge || won.Outcome != record.OutcomeWon ||
		lost.Channel != "stalls" || lost.Role != record.RolePrimary || lost.Outcome != record.OutcomeCancelled {
		t.Fatalf("attempts %+v", rec.Attempts)
	}
	// The loser has its own status: neither the client's cancel nor a
	// failure (issue 43).
	if lost.Status != record.AttemptHedgeLost {
		t.Errorf("the loser's status %q, want %q", lost.Status, record.AttemptHedgeLost)
	}
	// The hedge started after the delay, measured from the primary's t1.
	// Late by more than the slack only as far as this process's timers
	// were seen to slip meanwhile (on a loaded machine).
	slip := testenv.Slip(10 * time.Second)
	hedgeStart := msOrZero(won.UpstreamStartMs) - msOrZero(lost.UpstreamStartMs)
	if hedgeStart < float64(after.Milliseconds()) || hedgeStart > float64(after.Milliseconds())+150+2*float64(slip)/1e6 {
		t.Errorf("hedge started %.1f ms after the primary, want %v (+150 ms slack, timers ran up to %v late meanwhile)", hedgeStart, after, slip)
	}
	// The request's first response is the hedge's: its start plus the fast
	// channel's own time to first output.
	fr := msOrZero(rec.FirstResponseMs)
	if own := msOrZero(won.FirstResponseAtMs) - msOrZero(won.UpstreamStartMs); fr > msOrZero(won.UpstreamStartMs)+own+1 || own < 60 {
		t.Errorf("first_response_ms %.1f, hedge start %.1f + its own %.1f", fr, msOrZero(won.UpstreamStartMs), own)
	}
	if lost.FirstResponseAtMs.Valid() {
		t.Errorf("the loser has a first response at %v", lost.FirstResponseAtMs)
	}
	// Byte-exact: what the client got is what the fast channel sends.
	_, direct := do(t, fast.URL, "k", c)
	if string(body) != string(direct) {
		t.Errorf("relayed body differs from the fast channel's own (%d vs %d bytes)", len(body), len(direct))
	}
	// The loser's upstream saw the cancel by the time the client had its
	// first byte, give or take 100 ms.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(slowInfo)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(slowInfo) != 1 || !slowInfo[0].Cancelled {
		t.Fatalf("the stalled upstream saw %+v, want one cancelled request", slowInfo)
	}
	lag := slowInfo[0].CancelledAt.Sub(firstByte)
	t.Logf("hedge after %.1f ms; first response %.1f ms; loser cancelled %v after the client's first byte (received %v after its request)",
		hedgeStart, fr, lag, slowInfo[0].CancelledAt.Sub(slowInfo[0].Received))
	if tol := 100*time.Millisecond + 2*testenv.Slip(10*time.Second); lag > tol || lag < -tol {
		t.Errorf("the loser's upstream saw the cancel %v from the client's first byte, want within %v (100 ms, and twice what timers slipped meanwhile)", lag, tol)
	}
	if s, w, l := router.Hedges(); s != 1 || w != 1 || l != 0 {
		t.Errorf("hedges started/won/lost = %d/%d/%d, want 1/1/0", s, w, l)
	}
}

// TestHedgeNotAfterOutput: a primary that reaches first output before the
// hedge delay and then stalls is relayed alone: no hedge once its bytes
// went to the client.
func TestHedgeNotAfterOutput(t *testing.T) {
	// First output at 20 ms, the hedge delay 300 ms (room for a loaded
	// machine: 100 ms was seen to pass before the first output arrived),
	// then a stall of 1.2 s, well past it.
	prof := map[string]sim.Profile{"m": {HeadersMs: 5, TextMs: sim.Ms(20), VisibleTokens: 40, TPS: 200, Fault: "stall_after:2:1200"}}
	up, infos := upstream(t, prof)
	rt := &route.Route{Models: []string{"m"}, Hedge: &route.HedgePolicy{After: 300 * time.Millisecond, MaxShare: 1}}
	b := channel("b", "anthropic", up.URL, fastTimeouts)
	b.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("a", "anthropic", up.URL, fastTimeouts), b)
	rec := one(t, gw, recs, call{api: "anthropic", model: "m", stream: true})
	if rec.Status != record.StatusOK || len(rec.Attempts) != 1 || rec.Attempts[0].Role != record.RolePrimary {
		t.Fatalf("status %s attempts %+v", rec.Status, rec.Attempts)
	}
	if gap := msOrZero(rec.MaxOutputGapMs); gap < 500 {
		t.Fatalf("max_output_gap_ms %.0f: the stall did not happen after output", gap)
	}
	if s, _, _ := router.Hedges(); s != 0 || len(infos.all()) != 1 {
		t.Errorf("hedges started %d, upstream requests %d; want 0 and 1", s, len(infos.all()))
	}
}

// TestHedgeCapUnderOutage: every channel is slow to first output, so every
// request wants a hedge; max_share 0.2 keeps hedges to a fifth of the
// requests however many arrive at once (the route's budget starts empty, so
// its burst allowance plays no part).
func TestHedgeCapUnderOutage(t *testing.T) {
	prof := map[string]sim.Profile{"m": {HeadersMs: 5, FirstEventMs: 5, TextMs: sim.Ms(500), VisibleTokens: 3, TPS: 300}}
	up, infos := upstream(t, prof)
	const share, n = 0.2, 40
	rt := &route.Route{Models: []string{"m"}, Hedge: &route.HedgePolicy{After: 50 * time.Millisecond, MaxShare: share}}
	b := channel("b", "anthropic", up.URL, fastTimeouts)
	b.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("a", "anthropic", up.URL, fastTimeouts), b)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var got []record.Record
	for range n {
		wg.Go(func() {
			rec := one(t, gw, recs, call{api: "anthropic", model: "m", stream: true})
			mu.Lock()
			got = append(got, rec)
			mu.Unlock()
		})
	}
	wg.Wait()
	hedges := 0
	for _, rec := range got {
		if rec.Status != record.StatusOK {
			t.Errorf("status %s", rec.Status)
		}
		for _, a := range rec.Attempts {
			if a.Role == record.RoleHedge {
				hedges++
			}
		}
	}
	started, _, _ := router.Hedges()
	limit := int(share * n)
	t.Logf("%d concurrent requests, every one slow: %d hedges (limit %d), %d upstream requests", n, hedges, limit, len(infos.all()))
	if hedges == 0 {
		t.Fatal("no hedge at all: the test does not exercise the cap")
	}
	if hedges > limit || int(started) != hedges {
		t.Errorf("hedges %d (router says %d), want ≤ %d", hedges, started, limit)
	}
	if up := len(infos.all()); up > n+limit {
		t.Errorf("upstream requests %d, want ≤ %d", up, n+limit)
	}
}

// swap serves one of two simulators, switched at run time.
type swap struct {
	cur  atomic.Pointer[http.Handler]
	a, b http.Handler
}

func newSwap(a, b http.Handler) *swap {
	s := &swap{a: a, b: b}
	s.cur.Store(&s.a)
	return s
}
func (s *swap) flip()                                            { s.cur.Store(&s.b) }
func (s *swap) ServeHTTP(w http.ResponseWriter, r *http.Request) { (*s.cur.Load()).ServeHTTP(w, r) }

// TestLatencyStrategyFollowsASwap: when the fast and the slow channel
// trade profiles, traffic moves to the new fast one within a bounded number
// of requests (the old fast one's recent samples must turn over first).
func TestLatencyStrategyFollowsASwap(t *testing.T) {
	if testing.Short() {
		t.Skip("runs about 10 s of requests")
	}
	fast := sim.New(sim.Options{Profiles: map[string]sim.Profile{"m": {HeadersMs: 2, TextMs: sim.Ms(20), VisibleTokens: 2, TPS: 500}}})
	slow := sim.New(sim.Options{Profiles: map[string]sim.Profile{"m": {HeadersMs: 2, TextMs: sim.Ms(90), VisibleTokens: 2, TPS: 500}}})
	sa, sb := newSwap(fast, slow), newSwap(slow, fast)
	ua, ub := httptest.NewServer(sa), httptest.NewServer(sb)
	t.Cleanup(ua.Close)
	t.Cleanup(ub.Close)
	rt := &route.Route{Models: []string{"m"}, Strategy: route.StrategyLatency,
		Latency: route.LatencyPolicy{Definition: route.DefFirstResponse, Percentile: 0.5, Explore: 0.05}}
	gw, recs, _ := routedGateway(t, []*route.Route{rt}, channel("a", "anthropic", ua.URL, fastTimeouts), channel("b", "anthropic", ub.URL, fastTimeouts))
	c := call{api: "anthropic", model: "m", stream: true}
	// until sends requests until the last 10 all went to want; it returns
	// how many it took.
	until := func(want string, limit int) int {
		run := 0
		for i := 1; i <= limit; i++ {
			if one(t, gw, recs, c).Channel == want {
				run++
			} else {
				run = 0
			}
			if run == 10 {
				return i
			}
		}
		t.Fatalf("traffic did not settle on %s within %d requests", want, limit)
		return 0
	}
	n1 := until("a", 60)
	sa.flip()
	sb.flip()
	// a holds up to 128 recent samples at ~20 ms: its median turns once
	// about 64 new ones at ~90 ms came in.
	n2 := until("b", 200)
	t.Logf("settled on a after %d requests; after the swap on b after %d", n1, n2)
}

// TestHedgeRaceRetry: in a hedged route, a primary that fails with a 503
// is retried on the next channel at once (no hedge needed), and the record
// says so.
func TestHedgeRaceRetry(t *testing.T) {
	bad, _ := upstream(t, map[string]sim.Profile{"m": {HeadersMs: 5, TextMs: sim.Ms(10), VisibleTokens: 2, TPS: 500, Fault: "status:503"}})
	good, _ := upstream(t, map[string]sim.Profile{"m": {HeadersMs: 5, TextMs: sim.Ms(10), VisibleTokens: 2, TPS: 500}})
	rt := &route.Route{Models: []string{"m"}, Hedge: &route.HedgePolicy{After: time.Second, MaxShare: 1}}
	g := channel("good", "anthropic", good.URL, fastTimeouts)
	g.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("bad", "anthropic", bad.URL, fastTimeouts), g)
	rec := one(t, gw, recs, call{api: "anthropic", model: "m", stream: true})
	if rec.Status != record.StatusOK || rec.Channel != "good" || len(rec.Attempts) != 2 ||
		rec.Attempts[0].Role != record.RolePrimary || rec.Attempts[0].Outcome != record.OutcomeFailed || rec.Attempts[0].HTTPStatus != 503 ||
		rec.Attempts[1].Role != record.RoleRetry || rec.Attempts[1].Outcome != record.OutcomeWon {
		t.Fatalf("status %s channel %s attempts %+v", rec.Status, rec.Channel, rec.Attempts)
	}
	if fr := msOrZero(rec.FirstResponseMs); fr > 500 {
		t.Errorf("first response %.0f ms: the retry waited for the hedge delay", fr)
	}
	if s, _, _ := router.Hedges(); s != 0 {
		t.Errorf("%d hedges started", s)
	}
}

// TestHedgeRaceClientLeaves: a client that leaves during the race cancels
// both attempts' upstreams, and the request is recorded as cancelled.
func TestHedgeRaceClientLeaves(t *testing.T) {
	prof := map[string]sim.Profile{"m": {HeadersMs: 5, FirstEventMs: 5, TextMs: sim.Ms(5000), VisibleTokens: 2, TPS: 500}}
	up, infos := upstream(t, prof)
	rt := &route.Route{Models: []string{"m"}, Hedge: &route.HedgePolicy{After: 50 * time.Millisecond, MaxShare: 1}}
	b := channel("b", "anthropic", up.URL, fastTimeouts)
	b.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("a", "anthropic", up.URL, fastTimeouts), b)
	ctx, cancel := context.WithCancel(context.Background())
	req := call{api: "anthropic", model: "m", stream: true}.request(ctx, gw.URL, clientKey)
	done := make(chan string, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			done <- resp.Header.Get("X-Request-Id")
			resp.Body.Close()
			return
		}
		done <- ""
	}()
	// Both attempts under way: the hedge started (50 ms after the
	// primary, later on a loaded machine), and its request had the time
	// to reach the upstream.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if s, _, _ := router.Hedges(); s == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no hedge started within 10 s")
		}
	}
	time.Sleep(250*time.Millisecond + 2*testenv.Slip(time.Second))
	left := time.Now()
	cancel()
	<-done
	deadline := time.Now().Add(5 * time.Second)
	for len(infos.all()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	all := infos.all()
	if len(all) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(all))
	}
	for _, in := range all {
		if !in.Cancelled || in.CancelledAt.Sub(left) > 100*time.Millisecond+2*testenv.Slip(5*time.Second) {
			t.Errorf("upstream request cancelled %v, %v after the client left", in.Cancelled, in.CancelledAt.Sub(left))
		}
	}
	// The record: no response headers ever reached the client, so find it
	// among the records.
	deadline = time.Now().Add(5 * time.Second)
	for {
		recs.mu.Lock()
		n := len(recs.recs)
		recs.mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	recs.mu.Lock()
	defer recs.mu.Unlock()
	if len(recs.recs) != 1 || recs.recs[0].Status != record.StatusClientCancelled || len(recs.recs[0].Attempts) != 2 {
		t.Fatalf("records %+v", recs.recs)
	}
	for _, a := range recs.recs[0].Attempts {
		if a.Outcome != record.OutcomeFailed || a.Status != record.StatusClientCancelled {
			t.Errorf("attempt %+v", a)
		}
	}
}

// TestHedgeHoldBound: an upstream that sends more than the gateway holds
// back before its first output (a megabyte of heartbeats) ends the race:
// it is relayed as it comes, and no hedge starts, though the stream goes
// on past the hedge delay.
//
// The gateway must read the megabyte before the hedge delay runs out; a
// loaded machine can take longer than a short delay for that (a hedge
// then starts rightly), so the delay is a second and the measurement is
// retried: a gateway that holds the heartbeats for the race fails every
// attempt.
func TestHedgeHoldBound(t *testing.T) {
	const after = time.Second
	pad := ": " + strings.Repeat("p", 1022) + "\n\n"
	testenv.Timed(t, func(t testing.TB) {
		var stopAt atomic.Int64 // when the upstream sent its terminal event (unix ns)
		chatty := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			for range 1100 {
				w.Write([]byte(pad))
			}
			w.(http.Flusher).Flush()
			// On past the hedge delay: a race still on would start the
			// hedge meanwhile.
			select {
			case <-r.Context().Done():
				return
			case <-time.After(after + 400*time.Millisecond):
			}
			stopAt.Store(time.Now().UnixNano())
			w.Write([]byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"))
		}))
		t.Cleanup(chatty.Close)
		other, infos := upstream(t, nil)
		rt := &route.Route{Models: []string{"m"}, Hedge: &route.HedgePolicy{After: after, MaxShare: 1}}
		b := channel("other", "anthropic", other.URL, fastTimeouts)
		b.Priority = 1
		gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("chatty", "anthropic", chatty.URL, fastTimeouts), b)
		firstByte, body, rec := streamTimes(t, gw, recs, call{api: "anthropic", model: "m", stream: true})
		if rec.Channel != "chatty" || len(rec.Attempts) != 1 || len(body) < 1100*len(pad) {
			t.Fatalf("channel %s attempts %+v body %d bytes", rec.Channel, rec.Attempts, len(body))
		}
		// Held for the race, nothing would have reached the client before
		// the stream ended.
		if stop := time.Unix(0, stopAt.Load()); !firstByte.Before(stop) {
			t.Errorf("first byte %v after the upstream's last event: the heartbeats were held for the race", firstByte.Sub(stop))
		}
		if s, _, _ := router.Hedges(); s != 0 || len(infos.all()) != 0 {
			t.Errorf("hedges %d, other channel requests %d", s, len(infos.all()))
		}
	})
}

// TestEjectionOnResets: a channel that resets every connection before any
// output is ejected after N such failures like one that refuses them.
func TestEjectionOnResets(t *testing.T) {
	resets, _ := upstream(t, map[string]sim.Profile{"m": {HeadersMs: 2, TextMs: sim.Ms(5), VisibleTokens: 5, TPS: 500, Fault: "reset_after:0"}})
	good, _ := upstream(t, map[string]sim.Profile{"m": {HeadersMs: 2, TextMs: sim.Ms(5), VisibleTokens: 5, TPS: 500}})
	rt := &route.Route{Models: []string{"m"}, Eject: &route.EjectPolicy{ConsecutiveFailures: 2, Base: time.Minute, Max: time.Hour}}
	g := channel("good", "anthropic", good.URL, fastTimeouts)
	g.Priority = 1
	gw, recs, router := routedGateway(t, []*route.Route{rt}, channel("resets", "anthropic", resets.URL, fastTimeouts), g)
	c := call{api: "anthropic", model: "m", stream: true}
	for i := range 2 {
		rec := one(t, gw, recs, c)
		if rec.Attempts[0].Channel != "resets" || rec.Attempts[0].Status == record.StatusOK {
			t.Fatalf("request %d: attempts %+v", i, rec.Attempts)
		}
	}
	rec := one(t, gw, recs, c)
	if rec.Status != record.StatusOK || rec.Channel != "good" || !slices.Equal(rec.SkippedEjected, []string{"resets"}) {
		t.Fatalf("after two resets: status %s channel %s skipped %v", rec.Status, rec.Channel, rec.SkippedEjected)
	}
	for _, e := range router.Ejections() {
		if e.Channel == "resets" && (!e.Ejected || e.Ejections != 1) {
			t.Errorf("resets: %+v", e)
		}
	}
}
