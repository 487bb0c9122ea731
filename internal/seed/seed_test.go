package seed

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/diagnose"
	_ "github.com/ttfx/ttfx/internal/provider/all"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/wire"
)

func TestRecordsArePlausible(t *testing.T) {
	to := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const n = 60000
	g := New(Options{Records: n, From: to.Add(-7 * 24 * time.Hour), To: to, Seed: 3})
	statuses := map[string]int{}
	labels := map[string]int{}
	dims := map[string]map[string]bool{"channel": {}, "model": {}, "group": {}, "api": {}}
	streams, retried := 0, 0
	routes := map[string]bool{} // api + " " + route, by streaming or not
	var prev time.Time
	for !g.Done() {
		r := g.Next()
		if err := store.Validate(&r); err != nil {
			t.Fatalf("%s: %v", r.RequestID, err)
		}
		if r.Timestamp.Before(to.Add(-7*24*time.Hour)) || r.Timestamp.After(to) || r.Timestamp.Before(prev) {
			t.Fatalf("%s at %v: outside the range or out of order (previous %v)", r.RequestID, r.Timestamp, prev)
		}
		prev = r.Timestamp
		statuses[r.Status]++
		for _, l := range r.Diagnosis {
			labels[l]++
		}
		if len(r.Diagnosis) > 0 && r.Status != record.StatusOK && r.Diagnosis[0] != r.Status {
			t.Fatalf("%s: status %s but primary verdict %s", r.RequestID, r.Status, r.Diagnosis[0])
		}
		dims["channel"][r.Channel] = true
		for _, name := range append([]string{r.Channel}, channelsOf(r.Attempts)...) {
			if name != "" && !strings.HasPrefix(name, ChannelPrefix) {
				t.Fatalf("%s: channel %q does not say it is seeded (%s…)", r.RequestID, name, ChannelPrefix)
			}
		}
		dims["model"][r.Model] = true
		dims["group"][r.Group] = true
		dims["api"][r.API] = true
		routes[fmt.Sprintf("%s %s stream=%v", r.API, r.Route, r.Stream)] = true
		routes[r.Channel+" serves "+r.API] = true
		if r.Stream {
			streams++
		} else if r.FirstSSEEventMs.Valid() || r.FirstTextDeltaMs.Valid() || r.VisibleOutputTPS.Valid() {
			t.Fatalf("%s: a non-streaming record with stream marks: %+v", r.RequestID, r.Fields)
		}
		if len(r.Attempts) > 1 {
			retried++
			if r.Attempts[0].Outcome != record.OutcomeFailed || r.Attempts[1].Role != record.RoleRetry {
				t.Fatalf("%s: attempts %+v", r.RequestID, r.Attempts)
			}
		}
		// Marks in timeline order where present.
		f := r.Fields
		order := []struct {
			name string
			v    interface{ Ms() (float64, bool) }
		}{{"t1", f.UpstreamStartMs}, {"t2", f.UpstreamHeadersAtMs}, {"t3", f.FirstSSEEventMs}, {"t4", f.FirstResponseMs},
			{"t5", f.FirstTextDeltaMs}, {"t6", f.UpstreamDoneMs}, {"t7", f.TotalHandlerMs}}
		last := -1.0
		for _, m := range order {
			if v, ok := m.v.Ms(); ok {
				if v < last {
					t.Fatalf("%s: %s at %.3f ms before an earlier mark at %.3f: %+v", r.RequestID, m.name, v, last, f)
				}
				last = v
			}
		}
	}
	// Every terminal status, ok about 95 %.
	for _, s := range record.Statuses {
		if statuses[s] == 0 {
			t.Errorf("no record with status %s", s)
		}
	}
	if ok := float64(statuses[record.StatusOK]) / n; ok < 0.93 || ok > 0.97 {
		t.Errorf("ok share %.3f", ok)
	}
	// Every slow stage of §4 occurs, none in most requests.
	for _, l := range diagnose.RuleLabels {
		share := float64(labels[l]) / n
		if share == 0 || share > 0.2 {
			t.Errorf("label %s on %.4f of records", l, share)
		}
	}
	if s := float64(streams) / n; math.Abs(s-0.85) > 0.02 {
		t.Errorf("streaming share %.3f, want about 0.85", s)
	}
	if r := float64(retried) / n; r < 0.01 || r > 0.03 {
		t.Errorf("retried share %.3f, want about 0.02", r)
	}
	fleetAPIs := map[string]bool{}
	for _, ch := range channels() {
		for _, a := range ch.apis {
			fleetAPIs[a.api] = true
		}
	}
	if len(dims["channel"]) < 6 || len(dims["model"]) < 7 || len(dims["group"]) < 4 || len(dims["api"]) != len(fleetAPIs) || len(fleetAPIs) < 5 {
		t.Errorf("too little variety: %v (the fleet serves %v)", dims, fleetAPIs)
	}
	// Bedrock's Converse streams on a route of its own: a whole answer's
	// record names /converse.
	for _, want := range []string{
		"bedrock.converse POST /model/{target}/converse-stream stream=true",
		"bedrock.converse POST /model/{target}/converse stream=false",
		"anthropic POST /v1/messages stream=false",
		// A bedrock channel serves Converse clients and Anthropic ones.
		ChannelPrefix + "bedrock-main serves bedrock.converse", ChannelPrefix + "bedrock-main serves anthropic",
		"openai.chat POST /v1/chat/completions stream=true",
	} {
		if !routes[want] {
			t.Errorf("no record of %s: %v", want, routes)
		}
	}
	for rt := range routes {
		if strings.HasPrefix(rt, "bedrock.converse POST /model/{target}/converse-stream stream=false") || strings.HasPrefix(rt, "bedrock.converse POST /model/{target}/converse stream=true") {
			t.Errorf("a record's route does not match its streaming: %s", rt)
		}
	}
	// The fleet is the registry's: a channel for every kind with an
	// example, each serving an API of the kind's families.
	for _, k := range wire.Kinds() {
		if k.Example.Host != "" && !dims["channel"][ChannelPrefix+k.Name+"-main"] {
			t.Errorf("no record of kind %s's example channel: %v", k.Name, dims["channel"])
		}
	}
	t.Logf("statuses %v\nlabels %v", statuses, labels)
}

func TestSameSeedSameRecords(t *testing.T) {
	to := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := New(Options{Records: 500, To: to, Seed: 9})
	b := New(Options{Records: 500, To: to, Seed: 9})
	c := New(Options{Records: 500, To: to, Seed: 10})
	differ := false
	for !a.Done() {
		ra, rb, rc := a.Next(), b.Next(), c.Next()
		if !reflect.DeepEqual(ra, rb) {
			t.Fatalf("same seed, different records:\n%+v\n%+v", ra, rb)
		}
		differ = differ || ra.RequestID != rc.RequestID
	}
	if !differ {
		t.Error("another seed made the same records")
	}
}

func channelsOf(as []record.Attempt) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.Channel)
	}
	return out
}
