package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/tokens"
)

// Options are the settings of a run: the flags of `ttfx bench` (SPEC.md §9).
type Options struct {
	URL   string // base URL of the endpoint
	API   string // the API spoken (bench.APIs: one a unit registered)
	Model string
	Key   string // the endpoint's key; never recorded

	// Exactly one of Concurrency and Rate is set.
	Concurrency int
	Rate        float64 // requests per second
	Arrival     string  // rate mode: constant (default) or poisson
	ArrivalSeed int64
	MaxInflight int // rate mode: 0 means 10000

	// Exactly one of Requests and Duration is set.
	Requests int
	Duration time.Duration
	Warmup   int

	InputTokensMean float64
	InputTokensSD   float64
	PromptSeed      int64

	MaxTokens       int
	Stream          bool
	Timeout         time.Duration
	ReasoningEffort string
	ToolsFile       string // name of the tools file, for the conditions
	ToolsJSON       []byte // its contents; nil: no tools
	Sampling        Sampling
	Retry           Retry
	Labels          map[string]string

	// GatewayKey, when set, joins every row with the ttfx gateway's record
	// (read from GatewayURL, default the endpoint's host) and waits up to
	// GatewayWait (default 15 s) for records not written yet.
	GatewayKey  string
	GatewayURL  string
	GatewayWait time.Duration

	// HTTP is the client to use; nil: one with NewTransport sized for the load.
	HTTP *http.Client
	Now  timeline.Clock
	// OnRow and OnMeasure: see Plan.
	OnRow     func(Row)
	OnMeasure func()
}

// Setup checks the options and returns the plan and the conditions they
// describe, without sending anything.
func Setup(o Options) (Plan, Conditions, error) {
	var c Conditions
	a, err := request.Lookup(o.API)
	if err != nil {
		return Plan{}, c, fmt.Errorf("api: %w", err)
	}
	base, err := url.Parse(o.URL)
	if err != nil || o.URL == "" {
		return Plan{}, c, fmt.Errorf("url: want a base URL such as http://127.0.0.1:8080")
	}
	if base.User != nil || base.Query().Get("key") != "" {
		return Plan{}, c, errors.New("url: put the key in --key, not in the URL (it would be recorded)")
	}
	api := a.Name
	w := &Wire{API: api, Base: base, Model: o.Model, Key: o.Key, Stream: o.Stream, MaxTokens: o.MaxTokens,
		ReasoningEffort: o.ReasoningEffort, Sampling: o.Sampling, UserAgent: "ttfx-bench/" + Version}
	var tools *Tools
	if o.ToolsJSON != nil {
		if w.Tools, tools, err = LoadTools(o.ToolsFile, o.ToolsJSON); err != nil {
			return Plan{}, c, err
		}
	}
	if err := w.Check(); err != nil {
		return Plan{}, c, err
	}
	if s := o.Sampling; s.Temperature != nil && (math.IsNaN(*s.Temperature) || *s.Temperature < 0) ||
		s.TopP != nil && (math.IsNaN(*s.TopP) || *s.TopP < 0 || *s.TopP > 1) {
		return Plan{}, c, errors.New("sampling: temperature must be ≥ 0 and top_p in [0, 1]")
	}

	load := Load{}
	switch {
	case o.Concurrency > 0 && o.Rate > 0:
		return Plan{}, c, errors.New("give --concurrency or --rate, not both")
	case o.Rate > 0:
		if math.IsInf(o.Rate, 0) || o.Rate > 1e6 {
			return Plan{}, c, errors.New("rate: at most 1e6 requests per second")
		}
		load = Load{Mode: ModeRate, Rate: o.Rate, Arrival: o.Arrival, ArrivalSeed: o.ArrivalSeed, MaxInflight: o.MaxInflight}
		if load.Arrival == "" {
			load.Arrival = ArrivalConstant
		}
		if load.Arrival != ArrivalConstant && load.Arrival != ArrivalPoisson {
			return Plan{}, c, fmt.Errorf("arrival: want constant or poisson, got %q", o.Arrival)
		}
		if load.Arrival == ArrivalConstant {
			// A constant schedule has no randomness: its seed is not a
			// condition.
			load.ArrivalSeed = 0
		}
		if load.MaxInflight <= 0 {
			load.MaxInflight = 10000
		}
	case o.Concurrency > 0:
		if o.Arrival != "" {
			return Plan{}, c, errors.New("arrival: only with --rate")
		}
		load = Load{Mode: ModeConcurrency, Concurrency: o.Concurrency}
	default:
		return Plan{}, c, errors.New("give --concurrency N or --rate R")
	}
	switch {
	case o.Requests > 0 && o.Duration > 0:
		return Plan{}, c, errors.New("give --requests or --duration, not both")
	case o.Requests <= 0 && o.Duration <= 0:
		return Plan{}, c, errors.New("give --requests N or --duration D")
	case o.Warmup < 0:
		return Plan{}, c, errors.New("warmup: must be ≥ 0")
	case o.Timeout < 0:
		return Plan{}, c, errors.New("timeout: must be ≥ 0")
	}
	if o.Retry.Max < 0 {
		return Plan{}, c, errors.New("retries: must be ≥ 0")
	}
	for _, on := range o.Retry.On {
		ok := false
		for _, v := range RetryOn {
			ok = ok || on == v
		}
		if !ok {
			return Plan{}, c, fmt.Errorf("retry-on: %q is not one of %v", on, RetryOn)
		}
	}
	if o.Retry.Max > 0 && len(o.Retry.On) == 0 {
		return Plan{}, c, errors.New("retries: say which failures to retry with --retry-on")
	}
	prompts, err := NewPrompts(o.InputTokensMean, o.InputTokensSD, o.PromptSeed)
	if err != nil {
		return Plan{}, c, err
	}

	hc := o.HTTP
	if hc == nil {
		per := load.Concurrency
		if load.Mode == ModeRate {
			per = min(load.MaxInflight, 1024)
		}
		hc = &http.Client{Transport: NewTransport(per)}
	}
	labels := map[string]string{}
	maps.Copy(labels, o.Labels)
	retry := o.Retry
	if retry.On == nil {
		retry.On = []string{}
	}
	shown := *base
	shown.RawQuery, shown.Fragment = "", ""
	c = Conditions{
		Tool:  ThisTool(),
		URL:   shown.String(),
		API:   string(api),
		Route: w.Route(),
		Model: o.Model, Stream: o.Stream, IncludeUsage: o.Stream && a.IncludeUsage,
		Load:   load,
		Sample: Sample{Requests: max(o.Requests, 0), Warmup: o.Warmup},
		Prompt: Prompt{InputTokensMean: o.InputTokensMean, InputTokensSD: o.InputTokensSD, Tokenizer: tokens.Encoding,
			Generator: PromptGenerator, Seed: o.PromptSeed},
		MaxTokens: o.MaxTokens, ReasoningEffort: o.ReasoningEffort, Tools: tools, Sampling: o.Sampling,
		Retry:            retry,
		Labels:           labels,
		PercentileMethod: PercentileMethod,
		GatewayJoin:      o.GatewayKey != "",
		Machines:         1,
	}
	if o.Timeout > 0 {
		c.Timeout = timeline.SpanOf(o.Timeout)
	}
	if o.Duration > 0 {
		c.Sample.Duration = timeline.SpanOf(o.Duration)
	}
	if d, ok := retry.Backoff.Get(); !ok || d == 0 {
		c.Retry.Backoff = timeline.SpanOf(0)
	}
	plan := Plan{
		Client:  &Client{HTTP: hc, Wire: w, Now: o.Now, Timeout: o.Timeout, Retry: retry},
		Prompts: prompts, Load: load, Requests: o.Requests, Duration: o.Duration, Warmup: o.Warmup,
		Now: o.Now, OnRow: o.OnRow, OnMeasure: o.OnMeasure,
	}
	return plan, c, nil
}

// Bench runs a benchmark and returns its result: the conditions, the rows
// and the summary. A cancelled ctx ends the run early with what was
// measured (Run.Interrupted).
func Bench(ctx context.Context, o Options) (*Result, error) {
	plan, cond, err := Setup(o)
	if err != nil {
		return nil, err
	}
	out, err := Run(ctx, plan)
	if err != nil {
		return nil, err
	}
	id := newRunID()
	for i := range out.Rows {
		out.Rows[i].Run = id
	}
	if o.GatewayKey != "" && len(out.Rows) > 0 {
		gu := plan.Client.Wire.Base
		if o.GatewayURL != "" {
			if gu, err = url.Parse(o.GatewayURL); err != nil || gu.Host == "" {
				return nil, fmt.Errorf("gateway-url: want a base URL")
			}
		}
		wait := o.GatewayWait
		if wait <= 0 {
			wait = 15 * time.Second
		}
		// The join runs even after an interrupt: the rows are already
		// measured, and the records are worth having.
		j := &Joiner{HTTP: plan.Client.HTTP, Base: gu, Key: o.GatewayKey, Wait: wait}
		j.Join(context.WithoutCancel(ctx), out.Rows)
	}
	host, _ := os.Hostname()
	res := &Result{
		Format:     Format,
		Run:        RunInfo{ID: id, Host: host, Started: out.Started, Interrupted: out.Interrupted},
		Conditions: cond,
		Warmup:     out.Warmup,
		Requests:   out.Rows,
		Summary:    Summarize(out.Rows, out.Window, cond.Load),
	}
	if res.Requests == nil {
		res.Requests = []Row{}
	}
	if res.Warmup.Statuses == nil {
		res.Warmup.Statuses = map[string]int{}
	}
	return res, nil
}

func newRunID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
