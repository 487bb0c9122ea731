package web

import (
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// TestWaterfallHeldHeadersAndWait: the waterfall shows how long the
// response headers were held (t2 → headers_sent_ms) and names the
// request's wait before t0 on the local row (issue 15).
func TestWaterfallHeldHeadersAndWait(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	r := &record.Record{}
	r.AuthMs = timeline.SpanOf(ms(0.2))
	r.RequestWaitMs = timeline.SpanOf(ms(37.5))
	r.UpstreamStartMs = timeline.At(ms(1))
	r.UpstreamHeadersAtMs = timeline.At(ms(100))
	r.FirstSSEEventMs = timeline.At(ms(150))
	r.HeadersSentMs = timeline.At(ms(150.2))
	r.UpstreamDoneMs = timeline.At(ms(400))
	r.TotalHandlerMs = timeline.At(ms(401))
	rows, _ := detailRows(r)
	held := rowByGap(rows, "headers_held")
	if held == nil || held.Absent || held.Start != 100 || held.End != 150.2 {
		t.Fatalf("headers held row %+v", held)
	}
	local := rowByGap(rows, "local")
	if local == nil || !strings.Contains(local.Text, "waited 37.5 ms before t0") {
		t.Fatalf("local row %+v", local)
	}
	r.HeadersSentMs = timeline.Offset{}
	if rows, _ := detailRows(r); rowByGap(rows, "headers_held") != nil {
		t.Fatal("a headers_held row without headers_sent_ms")
	}
}
