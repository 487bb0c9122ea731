package bench

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/timeline"
)

// Version is the bench's version as recorded in every result. Release
// builds set it with -ldflags "-X github.com/ttfx/ttfx/internal/bench.Version=v1.2.3";
// the VCS revision, when the build recorded one, is kept beside it.
var Version = "dev"

// Tool identifies the program that made a result.
type Tool struct {
	Name     string `json:"name"`               // "ttfx bench"
	Version  string `json:"version"`            // Version
	Revision string `json:"revision,omitempty"` // VCS revision of the build ("…-dirty" for a modified tree); empty when unknown
	Go       string `json:"go"`                 // Go toolchain version
}

// ThisTool describes the running binary.
func ThisTool() Tool {
	t := Tool{Name: "ttfx bench", Version: Version, Go: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				t.Revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if t.Revision != "" && dirty {
			t.Revision += "-dirty"
		}
	}
	return t
}

// Load modes and arrival processes.
const (
	ModeConcurrency = "concurrency" // N closed-loop workers, each starting its next request when the last ended
	ModeRate        = "rate"        // open loop: requests start on an arrival schedule whatever is in flight

	ArrivalConstant = "constant" // one request every 1/R s
	ArrivalPoisson  = "poisson"  // exponential gaps of mean 1/R s (seeded, so the schedule is reproducible)
)

// Conditions are everything a run was made under that SPEC.md §9 asks to
// record: what was called, with what requests, under what load, and how
// the numbers were computed. Two runs are comparable only when their
// conditions agree in every field that affects speed (see Differences).
type Conditions struct {
	Tool Tool `json:"tool"`

	URL   string `json:"url"`   // base URL, without credentials or query
	API   string `json:"api"`   // the API spoken (SPEC §10 name, e.g. openai.chat)
	Route string `json:"route"` // method and path called, e.g. "POST /v1/chat/completions"
	Model string `json:"model"`

	Stream bool `json:"stream"`
	// IncludeUsage is set when a streaming openai.chat request asked for
	// stream_options.include_usage, so that visible tokens come from the
	// provider's usage rather than an estimate.
	IncludeUsage bool `json:"include_usage"`

	Load   Load   `json:"load"`
	Sample Sample `json:"sample"`
	Prompt Prompt `json:"prompt"`
	// MaxTokens is the output cap sent with every request; 0: none sent.
	MaxTokens       int      `json:"max_tokens"`
	ReasoningEffort string   `json:"reasoning_effort"` // as given; empty: not sent
	Tools           *Tools   `json:"tools"`            // nil: no tools sent
	Sampling        Sampling `json:"sampling"`

	// Timeout bounds each request, retries included.
	Timeout timeline.Span `json:"timeout_ms"`
	Retry   Retry         `json:"retry"`

	// Labels are free k=v conditions the bench cannot see itself: region,
	// network path, client machine class. They are conditions: runs with
	// different labels are not comparable.
	Labels map[string]string `json:"labels"`

	PercentileMethod string `json:"percentile_method"`
	// GatewayJoin is set when each request was joined with the gateway's
	// record (--gateway-key).
	GatewayJoin bool `json:"gateway_join"`
	// Machines is how many bench processes' rows the result holds (1,
	// or more after merge): N machines at concurrency C load the endpoint
	// like N·C.
	Machines int `json:"machines"`
}

// Load is how requests were started.
type Load struct {
	Mode        string  `json:"mode"`        // ModeConcurrency or ModeRate
	Concurrency int     `json:"concurrency"` // concurrency mode: workers; 0 in rate mode
	Rate        float64 `json:"rate"`        // rate mode: requests per second; 0 in concurrency mode
	Arrival     string  `json:"arrival"`     // rate mode: ArrivalConstant or ArrivalPoisson; empty in concurrency mode
	ArrivalSeed int64   `json:"arrival_seed"`
	MaxInflight int     `json:"max_inflight"` // rate mode: an arrival waits (and its lateness is recorded) while this many are in flight
}

// Sample is how many requests were measured.
type Sample struct {
	Requests int           `json:"requests"`    // measured requests asked for; 0 when a duration was given
	Duration timeline.Span `json:"duration_ms"` // measured phase length asked for; absent when a count was given
	Warmup   int           `json:"warmup"`      // requests run first and excluded from the rows and summary
}

// Prompt is the synthetic prompt distribution.
type Prompt struct {
	InputTokensMean float64 `json:"input_tokens_mean"`
	InputTokensSD   float64 `json:"input_tokens_sd"`
	Tokenizer       string  `json:"tokenizer"` // the tokenizer the prompts are measured with (o200k_base)
	Generator       string  `json:"generator"` // PromptGenerator
	Seed            int64   `json:"seed"`
}

// Tools describes the tool definitions sent with every request.
type Tools struct {
	File   string   `json:"file"`   // base name of the file
	SHA256 string   `json:"sha256"` // of the compacted JSON sent, so that two files with the same tools compare equal
	Count  int      `json:"count"`
	Names  []string `json:"names"`
}

// Retry policy: which failures are retried, how often and after what
// pause. Retries happen only before any byte of a response body was read;
// marks stay measured from the first attempt's write (the user waited for
// the failed attempts too).
type Retry struct {
	Max     int           `json:"max"`        // retries after the first attempt; 0: none (the default)
	On      []string      `json:"on"`         // RetryOn values
	Backoff timeline.Span `json:"backoff_ms"` // pause before each retry
}

// RetryOn values.
var RetryOn = []string{"connect_error", "timeout", "http_429", "http_5xx"}

// Difference is one condition in which two results differ.
type Difference struct {
	Field string // dotted path in conditions, e.g. "load.concurrency"
	A, B  string // the values as JSON; "absent" when a side lacks the field
	// Blocking is set when the field affects speed, so the runs must not
	// be ranked. Tool version, sample size and warmup are shown but do not
	// block: they change how precise the numbers are, not what they
	// measure.
	Blocking bool
}

// informational are the condition paths that do not block a comparison.
var informational = []string{"tool.", "sample.", "gateway_join"}

// Differences lists the conditions in which a and b differ, in path order.
// Every field not named informational blocks, so a condition added later
// blocks until someone decides otherwise.
func Differences(a, b Conditions) []Difference {
	if a.Labels == nil {
		a.Labels = map[string]string{}
	}
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	fa, fb := flatten(a), flatten(b)
	keys := make([]string, 0, len(fa)+len(fb))
	for k := range fa {
		keys = append(keys, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Difference
	for _, k := range keys {
		va, oka := fa[k]
		vb, okb := fb[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = "absent"
		}
		if !okb {
			vb = "absent"
		}
		d := Difference{Field: k, A: va, B: vb, Blocking: true}
		for _, p := range informational {
			if k == p || strings.HasPrefix(k, p) {
				d.Blocking = false
			}
		}
		out = append(out, d)
	}
	return out
}

// Blocking returns the differences that block a comparison.
func Blocking(ds []Difference) []Difference {
	var out []Difference
	for _, d := range ds {
		if d.Blocking {
			out = append(out, d)
		}
	}
	return out
}

// flatten maps every leaf of c's JSON to its dotted path. Null leaves are
// kept as "null", so that "not sent" and "sent" differ; an empty object
// has no leaves (no labels and an empty label set are the same).
func flatten(c Conditions) map[string]string {
	b, err := json.Marshal(c)
	if err != nil {
		panic("bench: conditions cannot be encoded: " + err.Error())
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		panic("bench: conditions cannot be decoded: " + err.Error())
	}
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, e)
			}
		case []any:
			e, _ := json.Marshal(x)
			out[prefix] = string(e)
		case nil:
			out[prefix] = "null"
		case string:
			out[prefix] = strconv.Quote(x)
		default:
			out[prefix] = fmt.Sprint(x)
		}
	}
	walk("", v)
	return out
}
