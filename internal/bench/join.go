package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/timeline"
)

// GatewayJoin is a row joined with the ttfx gateway's record of the same
// request (by X-Request-Id), and what the client saw split into the parts
// of the path it went through.
type GatewayJoin struct {
	Record *record.Record `json:"record"`          // the gateway's record; nil when the join failed
	Error  string         `json:"error,omitempty"` // why the join failed
	// Split holds, per metric (first_sse_event_ms, first_response_ms,
	// first_text_delta_ms, end_to_end_ms), the client's value split into
	// three parts that add up to it exactly; a metric is missing when the
	// client or the gateway lacks its mark. See Split.
	Split map[string]Split `json:"split"`
}

// Split divides one client-side mark C (from the client's write) by the
// gateway's record of the same request. Let U be the gateway's first
// upstream attempt start, G the gateway's own mark for the same milestone
// (t3, t4, t5 as the upstream bytes arrived, t6 for the end), and S the
// moment the gateway had passed it on (first_text_sent_ms for the first
// text, t7 for the end; unknown for the others), all from the gateway's t0:
//
//	upstream_ms        = G − U         the upstream's time, failed attempts and retries included
//	gateway_ms         = U + (S − G)   the gateway's own time: before the first attempt (body read, auth,
//	                                   routing), and holding the milestone before passing it on
//	network_client_ms  = C − S         (C − G where S is unknown) what lies outside the gateway: the request's
//	                                   transit to it and the response's transit back, and the client's parsing
//	held_for_hedging_ms                of a hedged request (an attempt with role hedge), the part of the
//	                                   above during which the milestone had arrived but the gateway held it
//	                                   back until the race's winner reached first output: from G to when the
//	                                   held headers went out (headers_sent_ms), taken out of gateway_ms where
//	                                   S is known and out of network_client_ms where it is not
//
// C and the gateway's marks have different origins (the client's write,
// the gateway's receipt), each on its own monotonic clock; network_client
// is the difference of two nested intervals ([write, seen] contains
// [receipt, sent]), which is the sum of the two transit gaps. It needs no
// clock synchronisation; its error is the two clocks' rate difference over
// the interval (parts per million). Where S is unknown, network_client
// also holds the gateway's flush of the event (microseconds, see the
// gateway's relay_lag for the first text). The gateway takes S after its
// flush returned, and over loopback the client can have read the bytes by
// then, so network_client can come out a few microseconds below zero:
// that is the gateway's write, counted in gateway_ms instead.
type Split struct {
	NetworkClientMs timeline.Span `json:"network_client_ms"`
	GatewayMs       timeline.Span `json:"gateway_ms"`
	UpstreamMs      timeline.Span `json:"upstream_ms"`
	// HeldForHedgingMs is the hedge's hold (see above); 0 for a request
	// that did not hedge. The four parts add up to C.
	HeldForHedgingMs timeline.Span `json:"held_for_hedging_ms"`
}

// Joiner reads gateway records for rows.
type Joiner struct {
	HTTP *http.Client
	Base *url.URL // the gateway's base URL; /api/requests/{id} is resolved against its host
	Key  string   // a viewer or admin key of the gateway
	// Wait bounds how long a record that is not there yet is polled for:
	// the gateway writes records asynchronously, in batches.
	Wait time.Duration
	// Parallel is how many records are fetched at once; 0 means 4.
	Parallel int
}

// Join fetches the gateway's record of every row that has a request id
// and fills in its Gateway join and split.
func (j *Joiner) Join(ctx context.Context, rows []Row) {
	par := j.Parallel
	if par <= 0 {
		par = 4
	}
	deadline := time.Now().Add(j.Wait)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := range rows {
		r := &rows[i]
		if r.RequestID == "" {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			g := &GatewayJoin{}
			rec, err := j.fetch(ctx, r.RequestID, deadline)
			if err != nil {
				g.Error = err.Error()
			} else {
				g.Record = rec
				g.Split = split(r, rec)
			}
			r.Gateway = g
		}()
	}
	wg.Wait()
}

// fetch reads one record, polling while the gateway answers 404 (not
// written yet) until deadline.
func (j *Joiner) fetch(ctx context.Context, id string, deadline time.Time) (*record.Record, error) {
	u := &url.URL{Scheme: j.Base.Scheme, Host: j.Base.Host, Path: "/api/requests/" + id}
	pause := 50 * time.Millisecond
	for {
		rec, status, err := j.get(ctx, u.String())
		if err == nil {
			return rec, nil
		}
		if status != http.StatusNotFound || time.Now().Add(pause).After(deadline) {
			return nil, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pause = min(pause*2, time.Second)
	}
}

func (j *Joiner) get(ctx context.Context, u string) (*record.Record, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+j.Key)
	req.Header.Set("Accept", "application/json")
	resp, err := j.HTTP.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("gateway record: %s", shortError(err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, resp.StatusCode, fmt.Errorf("gateway record: %s", shortError(err))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		json.Unmarshal(b, &e)
		return nil, resp.StatusCode, fmt.Errorf("gateway record: HTTP %d %s", resp.StatusCode, e.Error.Type)
	}
	var rec record.Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, resp.StatusCode, fmt.Errorf("gateway record: not a record: %s", shortError(err))
	}
	return &rec, resp.StatusCode, nil
}

// split computes the Split of each metric for which both sides have marks.
func split(r *Row, rec *record.Record) map[string]Split {
	out := map[string]Split{}
	if len(rec.Attempts) == 0 {
		return out
	}
	u, ok := rec.Attempts[0].UpstreamStartMs.Get()
	if !ok {
		return out
	}
	// A hedged request's events are held until the race's winner reached
	// first output; the held headers went out then, with them.
	hs, hedged := time.Duration(0), false
	for _, a := range rec.Attempts {
		if a.Role == record.RoleHedge {
			hs, hedged = rec.HeadersSentMs.Get()
			hedged = hedged && plausible(hs)
			break
		}
	}
	one := func(name string, c, g, s timeline.Offset) {
		cd, ok1 := c.Get()
		gd, ok2 := g.Get()
		if !ok1 || !ok2 || !plausible(cd) || !plausible(gd) || !plausible(u) {
			return
		}
		sp := Split{UpstreamMs: timeline.SpanOf(gd - u)}
		local := u
		outside := cd - gd
		var held time.Duration
		if sd, ok := s.Get(); ok && plausible(sd) {
			if hedged {
				held = min(max(hs-gd, 0), max(sd-gd, 0))
			}
			local += sd - gd - held
			outside = cd - sd
		} else if hedged {
			held = min(max(hs-gd, 0), max(outside, 0))
			outside -= held
		}
		sp.GatewayMs, sp.NetworkClientMs, sp.HeldForHedgingMs = timeline.SpanOf(local), timeline.SpanOf(outside), timeline.SpanOf(held)
		out[name] = sp
	}
	one(MetricFirstEvent, r.FirstSSEEventMs, rec.FirstSSEEventMs, timeline.Offset{})
	one(MetricFirstResponse, r.FirstResponseMs, rec.FirstResponseMs, timeline.Offset{})
	one(MetricFirstText, r.FirstTextDeltaMs, rec.FirstTextDeltaMs, rec.FirstTextSentMs)
	one(MetricEndToEnd, r.EndToEndMs, rec.UpstreamDoneMs, rec.TotalHandlerMs)
	return out
}

// plausible bounds the marks a split is computed from: a mark before its
// origin, or weeks after it, is not a measurement (and could overflow).
func plausible(d time.Duration) bool { return d >= 0 && d < 30*24*time.Hour }
