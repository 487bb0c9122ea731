package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/bench"
	"github.com/ttfx/ttfx/internal/bench/request"
	"github.com/ttfx/ttfx/internal/timeline"
)

func init() {
	register(command{name: "bench", summary: "benchmark an endpoint: the four TTFTs and visible speed under recorded conditions (report, compare, merge)", run: runBench})
}

// Exit codes of ttfx bench beyond 0, 1 (error) and 2 (usage).
const (
	// exitNotComparable: compare (without --force) or merge found runs
	// whose conditions differ in something that affects speed, other than
	// load alone for compare.
	exitNotComparable = 3
	// exitAllFailed: a run in which every measured request failed (the
	// result is still written).
	exitAllFailed = 4
)

var benchUsage = `usage:
  ttfx bench --url URL --api API --model M [flags]      run a benchmark
  ttfx bench report RUN.json [--html FILE]               print a result's summary (and write a page)
  ttfx bench compare A.json B.json … [--force]           p50/p95/p99 side by side, in the order given: for comparable runs,
                                                         or as a load series for runs that differ only in concurrency or rate;
                                                         --force shows any runs (marked NOT COMPARABLE) and exits 0
  ttfx bench merge A.json B.json … --out M.json          combine runs of the same conditions exactly

Run flags:
  --url URL              base URL of the endpoint (a gateway or a provider); a trailing /v1 is fine
  --api API              openai.chat (default), or another API: ` + strings.Join(request.APIs(), ", ") + `
  --model M              model name
  --key K | --key-env V  the endpoint's key (or the environment variable holding it); never recorded
  --concurrency N        N closed-loop workers (default 1) — or —
  --rate R               R requests/s open loop, --arrival constant|poisson (--arrival-seed S), --max-inflight N
  --requests N           measured requests (default 10) — or —
  --duration D           start measured requests for D, then wait for those in flight
  --warmup N             requests run first and excluded (recorded in the result)
  --input-tokens M[:SD]  prompt length in o200k_base tokens, normal with mean M and deviation SD (default 256)
  --prompt-seed S        seed of the synthetic prompts (default 1)
  --max-tokens N         output cap (default 256; 0 sends none, except for an API that requires one)
  --stream=true|false    streaming (default true)
  --timeout D            per request, retries included (default 2m; 0: none)
  --reasoning-effort E   reasoning effort (a word; where the API takes a thinking budget, a number is one)
  --tools FILE.json      a JSON array of tool definitions in the API's format, sent with every request
  --temperature T, --top-p P, --seed S   sampling parameters (sent only when given)
  --retries N            retries after a failure (default 0: none), --retry-on connect_error,timeout,http_429,http_5xx,
                         --retry-backoff D
  --label k=v            a condition the bench cannot see (region, network path, …); repeatable
  --out FILE.json        the result file; --csv FILE the rows as CSV
  --gateway-key K | --gateway-key-env V   a ttfx viewer/admin key: join each request with the gateway's record
  --gateway-url URL      where the gateway's /api is (default: --url's host); --gateway-wait D (default 15s)
  --progress auto|on|off progress on stderr (default auto: on a terminal)

Exit codes: 0 done; 1 error; 2 usage; 3 compare (without --force) or merge: the runs' conditions differ
in something that affects speed other than load alone (the differences are named); 4 every measured
request failed (result written).
`

func runBench(ctx context.Context, args []string) error {
	return benchMain(ctx, args, os.Stdout, os.Stderr)
}

// benchMain is runBench with its outputs given, for tests.
func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "report":
			return benchReport(args[1:], stdout)
		case "compare":
			return benchCompare(args[1:], stdout)
		case "merge":
			return benchMerge(args[1:], stdout)
		case "help", "-h", "--help":
			fmt.Fprint(stdout, benchUsage)
			return nil
		}
	}
	return benchRun(ctx, args, stdout, stderr)
}

// benchOptFloat and optInt are flags that remember whether they were given.
type benchOptFloat struct{ v *float64 }

func (o *benchOptFloat) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatFloat(*o.v, 'g', -1, 64)
}
func (o *benchOptFloat) Set(s string) error {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errors.New("want a number")
	}
	o.v = &f
	return nil
}

type benchOptInt64 struct{ v *int64 }

func (o *benchOptInt64) String() string {
	if o.v == nil {
		return ""
	}
	return strconv.FormatInt(*o.v, 10)
}
func (o *benchOptInt64) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("want an integer")
	}
	o.v = &n
	return nil
}

// benchLabels is the repeatable --label k=v.
type benchLabels map[string]string

func (l benchLabels) String() string { return "" }
func (l benchLabels) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return errors.New("want k=v")
	}
	if _, dup := l[k]; dup {
		return fmt.Errorf("label %q given twice", k)
	}
	l[k] = v
	return nil
}

func benchRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o bench.Options
	fs.StringVar(&o.URL, "url", "", "")
	fs.StringVar(&o.API, "api", "openai.chat", "")
	fs.StringVar(&o.Model, "model", "", "")
	fs.StringVar(&o.Key, "key", "", "")
	keyEnv := fs.String("key-env", "", "")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "")
	fs.Float64Var(&o.Rate, "rate", 0, "")
	fs.StringVar(&o.Arrival, "arrival", "", "")
	fs.Int64Var(&o.ArrivalSeed, "arrival-seed", 1, "")
	fs.IntVar(&o.MaxInflight, "max-inflight", 0, "")
	fs.IntVar(&o.Requests, "requests", 0, "")
	durationVar(fs, &o.Duration, "duration", 0)
	fs.IntVar(&o.Warmup, "warmup", 0, "")
	input := fs.String("input-tokens", "256", "")
	fs.Int64Var(&o.PromptSeed, "prompt-seed", 1, "")
	fs.IntVar(&o.MaxTokens, "max-tokens", 256, "")
	fs.BoolVar(&o.Stream, "stream", true, "")
	durationVar(fs, &o.Timeout, "timeout", 2*time.Minute)
	fs.StringVar(&o.ReasoningEffort, "reasoning-effort", "", "")
	toolsFile := fs.String("tools", "", "")
	var temp, topP benchOptFloat
	var seed benchOptInt64
	fs.Var(&temp, "temperature", "")
	fs.Var(&topP, "top-p", "")
	fs.Var(&seed, "seed", "")
	fs.IntVar(&o.Retry.Max, "retries", 0, "")
	retryOn := fs.String("retry-on", "", "")
	var backoffD time.Duration
	backoff := &backoffD
	durationVar(fs, backoff, "retry-backoff", 0)
	lbl := benchLabels{}
	fs.Var(lbl, "label", "")
	out := fs.String("out", "", "")
	csvOut := fs.String("csv", "", "")
	fs.StringVar(&o.GatewayKey, "gateway-key", "", "")
	gwKeyEnv := fs.String("gateway-key-env", "", "")
	fs.StringVar(&o.GatewayURL, "gateway-url", "", "")
	durationVar(fs, &o.GatewayWait, "gateway-wait", 15*time.Second)
	progress := fs.String("progress", "auto", "")
	if err := parseNoArgs(fs, args, benchUsage, stdout); err != nil {
		return err
	}
	if *keyEnv != "" {
		if o.Key != "" {
			return usageError("give --key or --key-env, not both")
		}
		o.Key = os.Getenv(*keyEnv)
		if o.Key == "" {
			return usageError("--key-env: %s is empty or not set", *keyEnv)
		}
	}
	if *gwKeyEnv != "" {
		if o.GatewayKey != "" {
			return usageError("give --gateway-key or --gateway-key-env, not both")
		}
		o.GatewayKey = os.Getenv(*gwKeyEnv)
		if o.GatewayKey == "" {
			return usageError("--gateway-key-env: %s is empty or not set", *gwKeyEnv)
		}
	}
	mean, sd, err := benchInputTokens(*input)
	if err != nil {
		return usageError("--input-tokens: %v", err)
	}
	o.InputTokensMean, o.InputTokensSD = mean, sd
	if o.Concurrency == 0 && o.Rate == 0 {
		o.Concurrency = 1
	}
	if o.Requests == 0 && o.Duration == 0 {
		o.Requests = 10
	}
	o.Sampling = bench.Sampling{Temperature: temp.v, TopP: topP.v, Seed: seed.v}
	if *retryOn != "" {
		o.Retry.On = strings.Split(*retryOn, ",")
	}
	if *backoff > 0 {
		o.Retry.Backoff = timeline.SpanOf(*backoff)
	}
	o.Labels = lbl
	if *toolsFile != "" {
		b, err := os.ReadFile(*toolsFile)
		if err != nil {
			return usageError("--tools: %v", err)
		}
		o.ToolsFile, o.ToolsJSON = *toolsFile, b
	}
	if _, _, err := bench.Setup(o); err != nil {
		return usageError("%v", err)
	}
	if o.Key == "" {
		fmt.Fprintln(stderr, "ttfx bench: warning: no key given (--key or --key-env): a gateway or provider that needs one answers every request with 401")
	}

	var show bool
	switch *progress {
	case "on":
		show = true
	case "off":
	case "auto":
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 && stderr == io.Writer(os.Stderr) {
			show = true
		}
	default:
		return usageError("--progress: want auto, on or off")
	}
	var stopProgress func()
	if show {
		tty := false
		if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
		p := &bench.Progress{W: stderr, TTY: tty, Total: o.Requests, Duration: o.Duration}
		o.OnRow, o.OnMeasure = p.Add, p.Measure
		pctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { p.Run(pctx); close(done) }()
		stopProgress = func() { cancel(); <-done }
	}
	res, err := bench.Bench(ctx, o)
	if stopProgress != nil {
		stopProgress()
	}
	if err != nil {
		return err
	}
	if *out != "" {
		if err := res.WriteFile(*out); err != nil {
			return err
		}
	}
	if *csvOut != "" {
		f, err := os.Create(*csvOut)
		if err != nil {
			return fmt.Errorf("csv: %w", err)
		}
		err = bench.WriteCSV(f, res.Requests)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("csv: %w", err)
		}
	}
	if err := bench.WriteReport(stdout, res); err != nil {
		return err
	}
	if *out != "" {
		fmt.Fprintf(stdout, "result: %s\n", *out)
	} else {
		fmt.Fprintln(stderr, "ttfx bench: no --out given; the result was not saved")
	}
	if res.Run.Interrupted {
		return &exitError{code: 130, err: errors.New("interrupted; the rows measured so far were kept")}
	}
	if s := res.Summary.Requests; s.Measured > 0 && s.OK == 0 && s.Failed > 0 {
		return &exitError{code: exitAllFailed, err: fmt.Errorf("all %d measured requests failed (%s)", s.Failed, benchStatusList(s.Statuses))}
	}
	return nil
}

func benchStatusList(m map[string]int) string {
	var parts []string
	for _, s := range bench.Statuses {
		if n := m[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, n))
		}
	}
	return strings.Join(parts, ", ")
}

// benchInputTokens reads MEAN[:SD].
func benchInputTokens(s string) (mean, sd float64, err error) {
	m, d, hasSD := strings.Cut(s, ":")
	if mean, err = strconv.ParseFloat(strings.TrimSpace(m), 64); err != nil {
		return 0, 0, fmt.Errorf("want MEAN[:SD], got %q", s)
	}
	if hasSD {
		if sd, err = strconv.ParseFloat(strings.TrimSpace(d), 64); err != nil {
			return 0, 0, fmt.Errorf("want MEAN[:SD], got %q", s)
		}
	}
	return mean, sd, nil
}

func benchReport(args []string, stdout io.Writer) error {
	const usage = "usage: ttfx bench report RUN.json [--html FILE]"
	fs := flag.NewFlagSet("bench report", flag.ContinueOnError)
	htmlOut := fs.String("html", "", "")
	files, err := parseFlags(fs, args, usage+"\n", stdout)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usageError("want one RUN.json, got %d\n%s", len(files), usage)
	}
	res, err := bench.ReadFile(files[0])
	if err != nil {
		return err
	}
	if err := bench.WriteReport(stdout, res); err != nil {
		return err
	}
	if *htmlOut != "" {
		f, err := os.Create(*htmlOut)
		if err != nil {
			return fmt.Errorf("html: %w", err)
		}
		err = bench.WriteHTML(f, res)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("html: %w", err)
		}
		fmt.Fprintf(stdout, "page: %s\n", *htmlOut)
	}
	return nil
}

func benchCompare(args []string, stdout io.Writer) error {
	const usage = "usage: ttfx bench compare A.json B.json … [--force]"
	fs := flag.NewFlagSet("bench compare", flag.ContinueOnError)
	force := fs.Bool("force", false, "")
	files, err := parseFlags(fs, args, usage+"\n", stdout)
	if err != nil {
		return err
	}
	if len(files) < 2 {
		return usageError("want at least two result files\n%s", usage)
	}
	runs, names, err := benchReadResults(files)
	if err != nil {
		return err
	}
	c := bench.Compare(names, runs)
	c.WriteDifferences(stdout)
	if _, _, _, series := c.SeriesAxis(); c.Comparable() || series || *force {
		// A load series (the runs differ only in concurrency or rate)
		// is shown as one; --force shows runs that differ in more,
		// marked as no ranking, and is not a failure: the user asked.
		if len(c.Differences) > 1 && !c.Comparable() {
			fmt.Fprintln(stdout)
		}
		return c.WriteTable(stdout)
	}
	var fields []string
	for _, ds := range c.Differences {
		for _, d := range bench.Blocking(ds) {
			fields = append(fields, d.Field)
		}
	}
	return &exitError{code: exitNotComparable, err: fmt.Errorf("not comparable: conditions differ in %s; runs that differ only in load (concurrency or rate) are shown as a series, and --force prints the table anyway, as no ranking",
		strings.Join(benchDedupe(fields), ", "))}
}

func benchMerge(args []string, stdout io.Writer) error {
	const usage = "usage: ttfx bench merge A.json B.json … --out M.json"
	fs := flag.NewFlagSet("bench merge", flag.ContinueOnError)
	out := fs.String("out", "", "")
	files, err := parseFlags(fs, args, usage+"\n", stdout)
	if err != nil {
		return err
	}
	if len(files) < 2 || *out == "" {
		return usageError("want at least two result files and --out\n%s", usage)
	}
	runs, _, err := benchReadResults(files)
	if err != nil {
		return err
	}
	m, err := bench.Merge(runs)
	if err != nil {
		return &exitError{code: exitNotComparable, err: err}
	}
	if err := m.WriteFile(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "merged %d results (%d requests) into %s\n", len(runs), len(m.Requests), *out)
	return nil
}

func benchReadResults(files []string) ([]*bench.Result, []string, error) {
	var runs []*bench.Result
	var names []string
	for _, f := range files {
		r, err := bench.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		runs = append(runs, r)
		names = append(names, filepath.Base(f))
	}
	return runs, names, nil
}

func benchDedupe(s []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}
