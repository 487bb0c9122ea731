// Package demo runs `ttfx demo`: a zero-config gateway and simulator in
// this process, the seed's three traces (through every API the benchmark
// client speaks) and a short mixed load through it, and a table of what
// the gateway recorded and diagnosed.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/diagnose"
	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// Options configure a demo run.
type Options struct {
	Dir    string // where ttfx.db lives; "" = working directory
	Listen string // gateway address; "" = 127.0.0.1:8080, or any free port if that is taken
	Stay   bool   // keep serving after the traffic until ctx ends
	Out    io.Writer
	Logger *slog.Logger
}

// Trace is one of the seed's traces with what SPEC.md §4 says of it.
type Trace struct {
	Model                                         string
	Headers, FirstResponse, FirstText, Total, TPS float64
	Verdict                                       string
}

// Traces are SPEC.md §4's acceptance table.
var Traces = []Trace{
	{"trace-a", 6100, 6350, 6400, 9200, 42, diagnose.UpstreamHeadersSlow},
	{"trace-b", 240, 2900, 8700, 10200, 55, diagnose.ResponseToTextGap},
	{"trace-c", 260, 420, 430, 20430, 9.8, diagnose.GenerationSlow},
}

// mixedProfiles are the profiles of the short mixed load (mixedLoad).
var mixedProfiles = []string{
	"fast", "fast", "fast", "fast", "reasoning", "reasoning", "reasoning",
	"tool-call", "tool-call", "tool-call", "fast", "fast", "fast", "fast",
	"truncate", "error-event", "flaky", "status-503", "status-429", "stall",
	"metadata-only",
}

// Run runs the demo. It returns an error when the gateway could not start
// or when a trace did not come out as SPEC.md §4 says.
func Run(ctx context.Context, opts Options) error {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	demoKey := auth.NewKey("ttfx-demo-")
	clientKey := auth.NewKey("ttfx-demo-client-")
	listen := opts.Listen
	if listen == "" {
		listen = "127.0.0.1:8080"
	}
	sopts := server.Options{
		Dir: opts.Dir, Listen: listen, Logger: log,
		ExtraKeys: []server.Generated{
			{Name: "demo", Role: auth.RoleAdmin, Secret: demoKey},
			{Name: "demo-client", Role: auth.RoleClient, Group: "demo", Secret: clientKey},
		},
	}
	srv, err := server.New(ctx, sopts)
	if err != nil && opts.Listen == "" {
		// 8080 is taken (a `ttfx serve` perhaps): any free port will do.
		sopts.Listen = "127.0.0.1:0"
		srv, err = server.New(ctx, sopts)
	}
	if err != nil {
		return err
	}
	serveCtx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(serveCtx) }()
	defer func() {
		stop()
		<-served
	}()

	fmt.Fprintf(out, "ttfx demo: gateway %s, simulator %s, store %s\n", srv.URL(), srv.SimURL(), "ttfx.db")
	srv.WriteKeys(out, "ttfx keys")
	fmt.Fprintln(out, "(the demo-* keys are replaced on each demo run; `ttfx keys new` makes lasting ones)")
	fmt.Fprintln(out)
	mixed := mixedLoad()
	apis := traceAPIs()
	fmt.Fprintf(out, "sending traces A, B, C through %d APIs and a mixed load of %d requests (about 21 s: trace C generates for 20 s)...\n\n", len(apis), len(mixed))
	start := time.Now()
	cl := &client{base: srv.URL(), key: clientKey}
	var wg sync.WaitGroup
	// traceIDs[a][i]: trace i sent in API apis[a] (the default API first).
	traceIDs := make([][]string, len(apis))
	traceErrs := make([][]error, len(apis))
	for a, api := range apis {
		traceIDs[a], traceErrs[a] = make([]string, len(Traces)), make([]error, len(Traces))
		for i, tr := range Traces {
			wg.Add(1)
			go func() {
				defer wg.Done()
				traceIDs[a][i], traceErrs[a][i] = cl.do(ctx, call{api, tr.Model})
			}()
		}
	}
	mixedIDs := make([]string, len(mixed))
	wg.Add(1)
	go func() {
		defer wg.Done()
		// A few at a time, so that the inflight counts mean something.
		sem := make(chan struct{}, 4)
		var mwg sync.WaitGroup
		for i, c := range mixed {
			sem <- struct{}{}
			mwg.Add(1)
			go func() {
				defer func() { <-sem; mwg.Done() }()
				mixedIDs[i], _ = cl.do(ctx, c)
			}()
		}
		mwg.Wait()
	}()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	ac := &api.Client{BaseURL: srv.URL(), Key: demoKey}
	var failed []string
	recs := make([][]record.Record, len(apis))
	for a := range apis {
		recs[a] = make([]record.Record, len(Traces))
		for i, id := range traceIDs[a] {
			if traceErrs[a][i] != nil {
				return fmt.Errorf("%s %s: %w", apis[a], Traces[i].Model, traceErrs[a][i])
			}
			if recs[a][i], err = ac.AwaitRequest(ctx, id, 10*time.Second); err != nil {
				return err
			}
			if r := recs[a][i]; len(r.Diagnosis) == 0 || r.Diagnosis[0] != Traces[i].Verdict || r.API != string(apis[a]) {
				failed = append(failed, fmt.Sprintf("%s %s: api %s status %s verdict %v, want %s", apis[a], Traces[i].Model, r.API, r.Status, r.Diagnosis, Traces[i].Verdict))
			}
		}
	}
	writeTraces(out, recs[0])
	fmt.Fprintln(out)
	writeVerdicts(out, apis, recs)
	var mixedRecs []record.Record
	for _, id := range mixedIDs {
		if id == "" {
			continue
		}
		if r, err := ac.AwaitRequest(ctx, id, 10*time.Second); err == nil {
			mixedRecs = append(mixedRecs, r)
		}
	}
	fmt.Fprintln(out)
	writeMixed(out, mixedRecs)
	fmt.Fprintf(out, "\ndone in %.1f s\n\n", time.Since(start).Seconds())

	fmt.Fprintln(out, "where to look next:")
	fmt.Fprintf(out, "  ttfx diagnose --url %s --key %s %s   # trace B, stage by stage\n", srv.URL(), demoKey, traceIDs[0][1])
	fmt.Fprintf(out, "  curl -H 'Authorization: Bearer %s' %s/api/requests?label=generation_slow\n", demoKey, srv.URL())
	fmt.Fprintf(out, "  curl -H 'Authorization: Bearer %s' '%s/api/stats?group_by=model'\n", demoKey, srv.URL())
	fmt.Fprintf(out, "  curl %s/metrics\n", srv.URL())
	fmt.Fprintf(out, "  dashboard: %s/ui/#key=%s  (signs in with the demo admin key)\n", srv.URL(), demoKey)
	if opts.Stay {
		fmt.Fprintln(out, "\nthe demo gateway keeps serving until you press Ctrl-C")
	} else {
		fmt.Fprintln(out, "\nthe demo gateway stops now; `ttfx demo --stay` keeps it serving, and `ttfx serve` serves the same records (ttfx.db, same keys) on 127.0.0.1:8080")
	}
	if len(failed) > 0 {
		return errors.New("the seed's traces did not come out as SPEC §4 says: " + strings.Join(failed, "; "))
	}
	if opts.Stay {
		<-ctx.Done()
	}
	return nil
}

// traceAPIs are the APIs the traces are sent in: the default API first,
// then every other one the benchmark client speaks (each reaches the
// simulator through its family's zero-config channel).
func traceAPIs() []protocol.API {
	out := []protocol.API{protocol.API(wire.Default().Name)}
	for _, a := range request.APIs() {
		if a != string(out[0]) {
			out = append(out, protocol.API(a))
		}
	}
	return out
}

// writeVerdicts prints the primary verdict of each trace in each API.
func writeVerdicts(w io.Writer, apis []protocol.API, recs [][]record.Record) {
	fmt.Fprintln(w, "the same traces through each API, primary verdicts (SPEC §4 says the same for every API):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "api\tchannel")
	for _, tr := range Traces {
		fmt.Fprintf(tw, "\t%s", tr.Model)
	}
	fmt.Fprintln(tw)
	for a, api := range apis {
		fmt.Fprintf(tw, "%s\t%s", api, recs[a][0].Channel)
		for _, r := range recs[a] {
			verdict := "-"
			if len(r.Diagnosis) > 0 {
				verdict = r.Diagnosis[0]
			}
			fmt.Fprintf(tw, "\t%s", verdict)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func writeTraces(w io.Writer, recs []record.Record) {
	fmt.Fprintln(w, "the seed's traces through the gateway (SPEC §4), measured vs expected:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "trace\tupstream_headers_ms\tfirst_response_ms\tfirst_text_delta_ms\ttotal_handler_ms\tvisible_output_tps\tprimary verdict\t")
	for i, r := range recs {
		tr := Traces[i]
		verdict := "-"
		if len(r.Diagnosis) > 0 {
			verdict = r.Diagnosis[0]
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", tr.Model,
			vs(r.UpstreamHeadersMs, tr.Headers), vs(r.FirstResponseMs, tr.FirstResponse), vs(r.FirstTextDeltaMs, tr.FirstText),
			vs(r.TotalHandlerMs, tr.Total), tps(r.VisibleOutputTPS, tr.TPS), verdict)
	}
	tw.Flush()
}

func vs(v interface{ Ms() (float64, bool) }, want float64) string {
	got, ok := v.Ms()
	if !ok {
		return fmt.Sprintf("- (%g)", want)
	}
	return fmt.Sprintf("%.0f (%g)", got, want)
}

func tps(r timeline.Rate, want float64) string {
	v, ok := r.Get()
	if !ok {
		return fmt.Sprintf("- (%g)", want)
	}
	return fmt.Sprintf("%.1f (%g)", v, want)
}

func writeMixed(w io.Writer, recs []record.Record) {
	fmt.Fprintf(w, "mixed load: %d requests\n", len(recs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "api\tmodel\tstatus\theaders\tfirst response\tfirst text\ttotal\ttps\tverdicts")
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Model < recs[j].Model })
	statuses := map[string]int{}
	for _, r := range recs {
		statuses[r.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.API, r.Model, r.Status,
			msOrDash(r.UpstreamHeadersMs), msOrDash(r.FirstResponseMs), msOrDash(r.FirstTextDeltaMs), msOrDash(r.TotalHandlerMs),
			r.VisibleOutputTPS, strings.Join(r.Diagnosis, ","))
	}
	tw.Flush()
	var keys []string
	for k := range statuses {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, statuses[k]))
	}
	fmt.Fprintf(w, "by terminal status: %s   (absent marks print as -, never 0)\n", strings.Join(parts, ", "))
}

func msOrDash(v interface{ Ms() (float64, bool) }) string {
	f, ok := v.Ms()
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f ms", math.Round(f))
}
