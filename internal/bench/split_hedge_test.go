package bench

import (
	"math"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// TestSplitHeldForHedging: a hedged request's events were held until the
// race's winner reached first output; the split names that hold as its own
// part instead of filing it under network_client_ms or gateway_ms
// (issue 43), and the four parts still add up to the client's value.
func TestSplitHeldForHedging(t *testing.T) {
	at := func(ms float64) timeline.Offset { return timeline.At(time.Duration(ms * float64(time.Millisecond))) }
	rec := &record.Record{Attempts: []record.Attempt{
		{Role: record.RolePrimary, UpstreamStartMs: at(1), Status: record.AttemptHedgeLost},
		{Role: record.RoleHedge, UpstreamStartMs: at(200), Status: record.StatusOK},
	}}
	rec.FirstSSEEventMs, rec.FirstResponseMs, rec.FirstTextDeltaMs = at(220), at(270), at(270)
	rec.HeadersSentMs, rec.FirstTextSentMs = at(280), at(280.05)
	row := &Row{FirstSSEEventMs: at(300), FirstResponseMs: at(301), FirstTextDeltaMs: at(281)}
	sp := split(row, rec)
	get := func(s timeline.Span) float64 { v, _ := s.Ms(); return v }
	for _, c := range []struct {
		metric                               string
		client, held, network, gateway, upst float64
	}{
		// Arrived at 220, held until the headers went out at 280.
		{MetricFirstEvent, 300, 60, 20, 1, 219},
		{MetricFirstResponse, 301, 10, 21, 1, 269},
		// Sent at 280.05: of the gateway's 10.05 ms, 10 were the hold.
		{MetricFirstText, 281, 10, 0.95, 1.05, 269},
	} {
		s, ok := sp[c.metric]
		if !ok {
			t.Fatalf("%s: no split", c.metric)
		}
		got := []float64{get(s.HeldForHedgingMs), get(s.NetworkClientMs), get(s.GatewayMs), get(s.UpstreamMs)}
		want := []float64{c.held, c.network, c.gateway, c.upst}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-6 {
				t.Errorf("%s: held/network/gateway/upstream %v, want %v", c.metric, got, want)
				break
			}
		}
		if sum := got[0] + got[1] + got[2] + got[3]; math.Abs(sum-c.client) > 1e-6 {
			t.Errorf("%s: parts add to %v, want %v", c.metric, sum, c.client)
		}
	}
	// Without a hedge nothing is held, whatever headers_sent_ms says.
	rec.Attempts = rec.Attempts[1:]
	rec.Attempts[0].Role = record.RolePrimary
	if s := split(row, rec)[MetricFirstEvent]; get(s.HeldForHedgingMs) != 0 || math.Abs(get(s.NetworkClientMs)-80) > 1e-6 {
		t.Errorf("unhedged: %+v", s)
	}
}
