package diagnose

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/ttfx/ttfx/internal/store/chstore"  // registers ClickHouse
	_ "github.com/ttfx/ttfx/internal/store/sqlstore" // registers SQLite and PostgreSQL

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
)

func TestExplain(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := New(config.Diagnosis{})
	base := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mk := func(i int, channel string, headers float64) record.Record {
		rc := rec(1, 1+headers, 2+headers, 100+headers, 110+headers, 500+headers, 501+headers, 50, 40)
		rc.RequestID = fmt.Sprintf("req_%s_%02d", channel, i)
		rc.Timestamp = base.Add(time.Duration(i) * time.Minute)
		rc.Channel, rc.Model, rc.API, rc.Route, rc.Region, rc.Provider = channel, "m", "openai.chat", "POST /v1/chat/completions", "eu", "sim"
		r.Diagnose(&rc)
		return rc
	}
	var recs []record.Record
	// Channel "calm": nine fast requests and one slow one.
	for i := 0; i < 9; i++ {
		recs = append(recs, mk(i, "calm", 100))
	}
	lone := mk(9, "calm", 6000)
	recs = append(recs, lone)
	// Channel "stormy": most requests slow before headers.
	for i := 0; i < 8; i++ {
		recs = append(recs, mk(i, "stormy", 5000+float64(i)))
	}
	recs = append(recs, mk(8, "stormy", 100), mk(9, "stormy", 100))
	// Outside the window: does not count.
	far := mk(0, "calm", 7000)
	far.RequestID, far.Timestamp = "req_far", base.Add(-2*time.Hour)
	recs = append(recs, far)
	if err := st.Insert(ctx, recs); err != nil {
		t.Fatal(err)
	}

	rep, err := r.Explain(ctx, st, lone, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Verdicts) != 1 || rep.Verdicts[0].Label != UpstreamHeadersSlow || !rep.Verdicts[0].Primary || rep.Verdicts[0].Finding == nil || rep.Verdicts[0].Check == "" {
		t.Fatalf("verdicts %+v", rep.Verdicts)
	}
	c := rep.Context
	if c.Peers != 9 || c.FlaggedAlike != 0 || c.Scope != "request" {
		t.Fatalf("lone slow request: peers %d flagged %d scope %s", c.Peers, c.FlaggedAlike, c.Scope)
	}
	fc := c.Fields["upstream_headers_ms"]
	// The context's percentiles come from rollup sketches: within 1% of
	// the exact value.
	if fc.Value == nil || *fc.Value != 6000 || fc.P50 == nil || math.Abs(*fc.P50-100) > 1 || fc.Count != 10 {
		t.Fatalf("upstream_headers_ms context %+v", fc)
	}
	if c.Region != "eu" || c.Provider != "sim" || c.PercentileMethod == "" || c.Definitions["first_response_ms"] == "" {
		t.Fatalf("context %+v", c)
	}

	rep, err = r.Explain(ctx, st, recs[10], store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Context.Peers != 9 || rep.Context.FlaggedAlike != 7 || rep.Context.Scope != "channel" {
		t.Fatalf("stormy channel: %+v", rep.Context)
	}
	if len(rep.Rules) != 7 || !rep.Rules[0].Fired || rep.Rules[1].Fired || rep.Rules[5].Label != GenerationStalled || rep.Rules[0].NotApplicable != "" {
		t.Fatalf("rules %+v", rep.Rules)
	}

	// A reader limited to one group sees only that group's peers.
	rep, err = r.Explain(ctx, st, lone, store.Filter{Group: "nobody-else"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Context.Peers != 0 || rep.Context.Fields["upstream_headers_ms"].Count != 0 {
		t.Fatalf("peers outside the reader's scope: %+v", rep.Context)
	}

	// Non-streaming requests of the same channel and model are not peers of
	// a stream (their headers come with the whole answer), and rule 1 is
	// not applicable to them rather than passed.
	var whole []record.Record
	for i := 0; i < 5; i++ {
		w := mk(20+i, "calm", 9000)
		w.RequestID, w.Timestamp, w.Stream = fmt.Sprintf("req_whole_%d", i), base.Add(time.Duration(i)*time.Minute), false
		r.Diagnose(&w)
		whole = append(whole, w)
	}
	if err := st.Insert(ctx, whole); err != nil {
		t.Fatal(err)
	}
	rep, err = r.Explain(ctx, st, lone, store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Context.Peers != 9 || !rep.Context.Stream || math.Abs(*rep.Context.Fields["upstream_headers_ms"].P50-100) > 1 {
		t.Fatalf("a stream's context mixes in non-streaming requests: %+v", rep.Context)
	}
	rep, err = r.Explain(ctx, st, whole[0], store.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Context.Peers != 4 || rep.Context.Stream || rep.Rules[0].NotApplicable != NotStreaming || rep.Rules[0].Fired || len(rep.Verdicts) != 0 {
		t.Fatalf("non-streaming request: rules %+v, context %+v", rep.Rules, rep.Context)
	}

	// A fast request has no verdict and no scope.
	rep, _ = r.Explain(ctx, st, recs[0], store.Filter{})
	if len(rep.Verdicts) != 0 || rep.Context.Scope != "" {
		t.Fatalf("fast request %+v", rep)
	}
}
