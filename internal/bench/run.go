package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/timeline"
)

// Plan is what a run does: the requests (a client and its prompts), the
// load, and the sample.
type Plan struct {
	Client  *Client
	Prompts *Prompts
	Load    Load
	// Requests is the number of measured requests; Duration, when
	// Requests is 0, the time during which measured requests are started
	// (requests in flight at its end are waited for and measured).
	Requests int
	Duration time.Duration
	// Warmup requests run first, under the same load, and are excluded
	// from the rows; the measured phase starts when they have all ended.
	Warmup int
	// Now is the clock of the schedule and the marks; nil: time.Now. The
	// schedule waits with real timers, so it must run at real speed.
	Now timeline.Clock
	// OnRow, when set, is called with every measured row as it ends, from
	// the request's goroutine.
	OnRow func(Row)
	// OnMeasure, when set, is called when the measured phase starts.
	OnMeasure func()
}

// Outcome is what a run measured.
type Outcome struct {
	Rows []Row // in Index order
	// Origin is the start of the measured phase's schedule (due_ms and
	// start_ms are from it); Started its wall-clock time.
	Origin  time.Time
	Started time.Time
	// Window is from the first measured request written to the last byte
	// (or failure) of the last one.
	Window      time.Duration
	Warmup      Warmup
	Interrupted bool
}

// job is one request ready to be sent.
type job struct {
	index  int
	body   []byte
	prompt int // prompt tokens
	err    error
}

// warmupBase offsets the prompt indexes of warmup requests, so that the
// measured requests get the same prompts whatever the warmup.
const warmupBase = 1 << 40

// Run executes the plan. It returns when every started request has
// ended; a cancelled ctx stops the schedule and cancels the requests in
// flight (their rows say cancelled, and the outcome is Interrupted).
func Run(ctx context.Context, p Plan) (Outcome, error) {
	if p.Client == nil || p.Prompts == nil {
		return Outcome{}, errors.New("bench: plan needs a client and prompts")
	}
	if p.Requests <= 0 && p.Duration <= 0 {
		return Outcome{}, errors.New("bench: give a number of requests or a duration")
	}
	switch p.Load.Mode {
	case ModeConcurrency:
		if p.Load.Concurrency < 1 {
			return Outcome{}, errors.New("bench: concurrency must be at least 1")
		}
	case ModeRate:
		if !(p.Load.Rate > 0) {
			return Outcome{}, errors.New("bench: rate must be positive")
		}
		if p.Load.Arrival != ArrivalConstant && p.Load.Arrival != ArrivalPoisson {
			return Outcome{}, errors.New("bench: arrival must be constant or poisson")
		}
	default:
		return Outcome{}, errors.New("bench: load mode must be concurrency or rate")
	}
	now := p.Now
	if now == nil {
		now = time.Now
	}
	var out Outcome
	if p.Warmup > 0 {
		rows, _, err := p.phase(ctx, now, warmupBase, p.Warmup, 0, false)
		if err != nil {
			return out, err
		}
		out.Warmup = Warmup{Requests: len(rows), Statuses: map[string]int{}}
		for _, r := range rows {
			out.Warmup.Statuses[r.Status]++
			if r.ok() {
				out.Warmup.OK++
			}
		}
		if ctx.Err() != nil {
			out.Interrupted = true
			return out, nil
		}
	}
	if p.OnMeasure != nil {
		p.OnMeasure()
	}
	rows, origin, err := p.phase(ctx, now, 0, p.Requests, p.Duration, true)
	if err != nil {
		return out, err
	}
	out.Origin = origin
	out.Started = time.Now().UTC().Add(origin.Sub(now()))
	out.Rows = rows
	// Interrupted: the run was stopped before its sample was complete —
	// requests were cancelled, or fewer were started than asked for.
	for i := range rows {
		out.Interrupted = out.Interrupted || rows[i].Status == StatusCancelled
	}
	if ctx.Err() != nil && (p.Requests > 0 && len(rows) < p.Requests || p.Requests == 0 && now().Before(origin.Add(p.Duration))) {
		out.Interrupted = true
	}
	var first, last time.Time
	for i := range rows {
		r := &rows[i]
		if r.origin.IsZero() {
			continue
		}
		if first.IsZero() || r.origin.Before(first) {
			first = r.origin
		}
		if d, ok := r.EndToEndMs.Get(); ok {
			if end := r.origin.Add(d); end.After(last) {
				last = end
			}
		}
	}
	if !first.IsZero() && last.After(first) {
		out.Window = last.Sub(first)
	}
	return out, nil
}

// phase runs n requests (or, with n = 0, starts requests for d) with
// prompt indexes from base, and returns the rows in index order and the
// schedule's origin. Rows of a measured phase get their due and start
// offsets from that origin and go to OnRow.
func (p *Plan) phase(ctx context.Context, now timeline.Clock, base, n int, d time.Duration, measured bool) ([]Row, time.Time, error) {
	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	// Bodies are made ahead of the schedule by one producer, so that
	// building a prompt (and counting its tokens) is not part of any
	// request's scheduling lag.
	ahead := 64
	if p.Load.Mode == ModeConcurrency {
		ahead = max(ahead, 2*p.Load.Concurrency)
	}
	jobs := make(chan job, ahead)
	ready := make(chan struct{})
	go func() {
		defer close(jobs)
		defer func() {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}()
		for i := 0; n == 0 || i < n; i++ {
			if i == ahead {
				close(ready)
			}
			text, tok := p.Prompts.Prompt(base + i)
			body, err := p.Client.Wire.Body(text)
			select {
			case jobs <- job{index: i, body: body, prompt: tok, err: err}:
			case <-pctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	// The schedule starts once the first bodies are ready.
	select {
	case <-ready:
	case <-ctx.Done():
	}
	start := now()
	var stopAt time.Time
	if n == 0 {
		stopAt = start.Add(d)
	}
	var (
		mu     sync.Mutex // guards rows and jobErr
		rows   []Row
		jobErr error
		wg     sync.WaitGroup
	)
	finish := func(j job, due time.Time, r Row) {
		r.Index = j.index
		r.Tokens.Prompt = j.prompt
		if !r.start.IsZero() {
			r.SchedLagMs = timeline.SpanOf(r.start.Sub(due))
		}
		if measured {
			r.DueMs = timeline.At(due.Sub(start))
			if !r.origin.IsZero() {
				r.StartMs = timeline.At(r.origin.Sub(start))
			}
			if p.OnRow != nil {
				p.OnRow(r)
			}
		}
		mu.Lock()
		rows = append(rows, r)
		mu.Unlock()
	}
	take := func() (job, bool) {
		select {
		case j, ok := <-jobs:
			if ok && j.err != nil {
				mu.Lock()
				jobErr = j.err
				mu.Unlock()
				return j, false
			}
			return j, ok
		case <-ctx.Done():
			return job{}, false
		}
	}

	switch p.Load.Mode {
	case ModeConcurrency:
		for w := 0; w < p.Load.Concurrency; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					// The worker is free: this request is due now.
					due := now()
					if ctx.Err() != nil || (!stopAt.IsZero() && !due.Before(stopAt)) {
						return
					}
					j, ok := take()
					if !ok {
						return
					}
					finish(j, due, p.Client.Do(ctx, j.body))
				}
			}()
		}
	case ModeRate:
		var rng *rand.Rand
		if p.Load.Arrival == ArrivalPoisson {
			rng = rand.New(rand.NewPCG(uint64(p.Load.ArrivalSeed), uint64(base)))
		}
		var slots chan struct{}
		if p.Load.MaxInflight > 0 {
			slots = make(chan struct{}, p.Load.MaxInflight)
		}
		gap := time.Duration(float64(time.Second) / p.Load.Rate)
		const lead = 2 * time.Millisecond
		var at time.Duration // the next arrival, from start
		timer := time.NewTimer(time.Hour)
		timer.Stop()
	schedule:
		for i := 0; n == 0 || i < n; i++ {
			if i > 0 {
				if rng != nil {
					at += time.Duration(rng.ExpFloat64() * float64(time.Second) / p.Load.Rate)
				} else {
					at = time.Duration(i) * gap
				}
			}
			due := start.Add(at)
			if !stopAt.IsZero() && !due.Before(stopAt) {
				break
			}
			// The request's goroutine starts lead before it is due and
			// waits for it itself (Client.DoAt), so that neither starting
			// a goroutine nor building the request delays it.
			if wait := due.Add(-lead).Sub(now()); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					break schedule
				}
			}
			if slots != nil {
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					break schedule
				}
			}
			j, ok := take()
			if !ok {
				break
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				finish(j, due, p.Client.DoAt(ctx, j.body, due))
				if slots != nil {
					<-slots
				}
			}()
		}
	}
	wg.Wait()
	stopProducer()
	for range jobs {
	}
	if jobErr != nil {
		return nil, start, jobErr
	}
	slices.SortFunc(rows, func(a, b Row) int { return a.Index - b.Index })
	return rows, start, nil
}

// NewTransport returns the bench's HTTP transport: keep-alive connections
// (enough idle ones per host for the load, so that connection set-up is
// not measured again and again), no transparent compression (gzip would
// hold events back and is not what a streaming client asks for), HTTP/2
// where the server offers it, as SDKs do.
func NewTransport(perHost int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxIdleConns:          max(perHost, 100),
		MaxIdleConnsPerHost:   max(perHost, 2),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
