package telemetry_test

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/ttfx/ttfx/internal/telemetry"
	"github.com/ttfx/ttfx/internal/testenv"
)

// deployDir holds what operators load into Prometheus (issue 17).
var deployDir = filepath.Join("..", "..", "deploy", "prometheus")

// promtoolBinary finds promtool (Debian's prometheus package ships it).
func promtoolBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("promtool"); err == nil {
		return p
	}
	testenv.Missing(t, "the promtool binary", "Debian package prometheus; `bash scripts/ci-prometheus.sh` installs it")
	return ""
}

// TestPromtoolRules runs what CI asks of the rule files: promtool check
// rules, promtool test rules (each alert firing and not firing, in
// alerts.test.yml), and promtool check config on the example
// prometheus.yml with its key file present.
func TestPromtoolRules(t *testing.T) {
	bin := promtoolBinary(t)
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run(deployDir, "check", "rules", "rules.yml", "alerts.yml")
	run(deployDir, "test", "rules", "alerts.test.yml")

	// The example configuration, with its key file where it says.
	dir := t.TempDir()
	cfg, err := os.ReadFile(filepath.Join(deployDir, "prometheus.yml"))
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "ttfx-metrics.key")
	os.WriteFile(key, []byte("k"), 0o600)
	cfg = []byte(strings.ReplaceAll(string(cfg), "/etc/prometheus/ttfx-metrics.key", key))
	for _, f := range []string{"rules.yml", "alerts.yml"} {
		b, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "prometheus.yml"), cfg, 0o644)
	run(dir, "check", "config", "prometheus.yml")
}

// routingFamilies are metric families whose queries are checked error-free
// only, not non-empty. Empty: routing's families (ejection, hedges) are
// exposed by every gateway, so their queries must answer with numbers too.
var routingFamilies = []string{}

func fromRouting(expr string) bool {
	for _, f := range routingFamilies {
		if regexp.MustCompile(`\b` + f + `\b`).MatchString(expr) {
			return true
		}
	}
	return false
}

// deployQuery is one PromQL expression shipped in deploy/.
type deployQuery struct {
	where string // file and panel or rule
	expr  string
	// signals are the parts of an alert expression that must be
	// non-empty: each operand of a top-level and/or/unless, without its
	// threshold comparison (the whole alert is empty while it does not
	// fire, which is what the test's traffic should cause).
	signals []string
}

// grafanaVars replaces the dashboard's template variables as Grafana
// would with "All" selected and stream=true (the test's traffic streams).
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m", "$__interval", "15s", "$__range", "5m",
	`"$api"`, `".*"`, `"$model"`, `".*"`, `"$channel"`, `".*"`, `"$group"`, `".*"`, `"$stream"`, `"true"`,
)

// labelValues turns Grafana's label_values(SELECTOR, LABEL) into the PromQL
// that answers it.
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)

// dashboardQueries returns every PromQL expression of the Grafana JSON:
// panel targets and template-variable queries.
func dashboardQueries(t *testing.T) []deployQuery {
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []deployQuery
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(selector, label)", v.Name, v.Definition)
			continue
		}
		out = append(out, deployQuery{where: "grafana variable " + v.Name, expr: grafanaVars.Replace("count by (" + m[2] + ") (" + m[1] + ")")})
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			e := grafanaVars.Replace(tg.Expr)
			if strings.Contains(e, "$") {
				t.Errorf("panel %q: a variable the test cannot substitute in %s", p.Title, tg.Expr)
				continue
			}
			out = append(out, deployQuery{where: "grafana panel " + p.Title, expr: e})
		}
	}
	return out
}

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// ruleQueries returns every expression of the rule files, and for the
// recording rules also the series they record (so the test sees the rules
// loaded and evaluated).
func ruleQueries(t *testing.T) []deployQuery {
	var out []deployQuery
	for _, f := range []string{"rules.yml", "alerts.yml"} {
		b, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			t.Fatal(err)
		}
		var rf ruleFile
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				expr := strings.TrimSpace(r.Expr)
				switch {
				case r.Record != "":
					out = append(out, deployQuery{where: f + " record " + r.Record, expr: expr},
						deployQuery{where: f + " recorded series " + r.Record, expr: r.Record})
				case r.Alert != "":
					out = append(out, deployQuery{where: f + " alert " + r.Alert, expr: expr, signals: alertSignals(expr)})
				}
			}
		}
	}
	return out
}

// alertSignals splits an alert expression at its top-level and/or/unless
// (with their on/ignoring modifiers) and strips each part's threshold
// comparison: "A > 5 and on (x) B > 0.05" gives A and B.
func alertSignals(expr string) []string {
	var parts []string
	depth, start := 0, 0
	var quote byte
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case quote != 0:
			if c == '\\' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			depth--
		case depth == 0:
			for _, kw := range []string{"and", "or", "unless"} {
				if strings.HasPrefix(expr[i:], kw) && (i == 0 || isSpace(expr[i-1])) && i+len(kw) < len(expr) && isSpace(expr[i+len(kw)]) {
					parts = append(parts, expr[start:i])
					i += len(kw)
					rest := strings.TrimLeft(expr[i:], " \t\n")
					for _, mod := range []string{"on", "ignoring"} {
						if strings.HasPrefix(rest, mod) {
							if j := strings.IndexByte(rest, ')'); j >= 0 {
								rest = rest[j+1:]
							}
						}
					}
					start = len(expr) - len(rest)
					i = start - 1
					break
				}
			}
		}
	}
	parts = append(parts, expr[start:])
	var out []string
	for _, p := range parts {
		out = append(out, strings.TrimSpace(stripComparison(p)))
	}
	return out
}

func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\t' }

// stripComparison returns the left side of a top-level comparison with a
// number ("X > 5" gives X); an expression without one is returned as is.
var comparison = regexp.MustCompile(`\s*(==|!=|>=|<=|>|<)\s*(bool\s+)?[0-9.e+-]+\s*$`)

func stripComparison(s string) string {
	s = strings.TrimSpace(s)
	return comparison.ReplaceAllString(s, "")
}

// promResult is an instant query's answer: its samples' values (NaN
// included) and the native histograms' bucket boundaries.
type promResult struct {
	status, err string
	values      []float64
	histograms  [][][4]any
}

func promInstant(t *testing.T, base, q string) promResult {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Value     [2]any             `json:"value"`
				Histogram [2]json.RawMessage `json:"histogram"`
			} `json:"result"`
		} `json:"data"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &body); err != nil {
		t.Fatalf("query %s: %v: %s", q, err, raw)
	}
	r := promResult{status: body.Status, err: body.Error}
	for _, s := range body.Data.Result {
		if s.Histogram[1] != nil {
			var h struct {
				Buckets [][4]any `json:"buckets"`
			}
			json.Unmarshal(s.Histogram[1], &h)
			r.histograms = append(r.histograms, h.Buckets)
			continue
		}
		str, _ := s.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			t.Fatalf("query %s: value %q", q, str)
		}
		r.values = append(r.values, v)
	}
	return r
}

// hasNumber reports whether r holds a sample that is a number.
func (r promResult) hasNumber() bool {
	for _, v := range r.values {
		if !math.IsNaN(v) {
			return true
		}
	}
	return false
}

// TestDeployAgainstPrometheus is issue 17's acceptance with the real
// Prometheus: a gateway serves simulator traffic; one Prometheus scrapes
// it with deploy/prometheus's rules loaded, and every PromQL expression of
// the Grafana dashboard and of the rules must answer without error and
// with at least one number (routing's families: without error only); a
// second Prometheus with native histograms on scrapes the same gateway,
// and its histogram_quantile agrees with the records' own percentiles
// within the schema's stated error.
func TestDeployAgainstPrometheus(t *testing.T) {
	bin := prometheusBinary(t)
	g := startGateway(t)
	target := strings.TrimPrefix(g.url, "http://")

	// The rule files as shipped, evaluated every second instead of every
	// 30 s so that the test need not wait for them.
	rulesDir := t.TempDir()
	var ruleFiles []string
	for _, f := range []string{"rules.yml", "alerts.yml"} {
		b, err := os.ReadFile(filepath.Join(deployDir, f))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(rulesDir, f)
		os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "interval: 30s", "interval: 1s")), 0o644)
		ruleFiles = append(ruleFiles, p)
	}
	scrape := fmt.Sprintf(`
scrape_configs:
  - job_name: ttfx
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: [%q]
`, target)
	global := fmt.Sprintf("global: {scrape_interval: 1s, evaluation_interval: 1s}\nrule_files: [%q, %q]\n", ruleFiles[0], ruleFiles[1])
	classic := startPrometheusConfig(t, bin, global+scrape)
	native := startPrometheusConfig(t, bin, global+scrape, "--enable-feature=native-histograms")
	waitQuery(t, classic, `up{job="ttfx"}`, func(v float64) bool { return v == 1 })
	waitQuery(t, native, `up{job="ttfx"}`, func(v float64) bool { return v == 1 })

	// Two rounds of the same traffic, each seen by a scrape, so that
	// every series exists in both and rate() has an increase to show:
	// the four protocols streaming, non-streaming, a tool call, an
	// upstream error, and the spread profile for the quantile check.
	var mu sync.Mutex
	var spreadIDs []string
	total := 0
	round := func() {
		var wg sync.WaitGroup
		sem := make(chan struct{}, 6)
		run := func(f func() (string, error), spread bool) {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				id, err := f()
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total++
				if spread {
					spreadIDs = append(spreadIDs, id)
				}
				mu.Unlock()
			}()
		}
		for _, c := range []struct {
			api, model string
			n          int
		}{{"openai.chat", "quick", 3}, {"anthropic", "quick", 2}, {"gemini", "quick", 2}, {"openai.chat", "tools", 2}, {"openai.chat", "down", 2}, {"openai.chat", "spread", 30}} {
			for range c.n {
				run(func() (string, error) { return g.do(c.api, c.model, g.client) }, c.model == "spread")
			}
		}
		for range 2 {
			run(func() (string, error) { return g.doNonStream("quick") }, false)
		}
		wg.Wait()
	}
	count := `sum(ttfx_requests_total)`
	round()
	waitQuery(t, classic, count, func(v float64) bool { return v == float64(total) })
	waitQuery(t, native, count, func(v float64) bool { return v == float64(total) })
	round()
	waitQuery(t, classic, count, func(v float64) bool { return v == float64(total) })
	waitQuery(t, native, count, func(v float64) bool { return v == float64(total) })
	// Recording rules run every second: wait for one that reads the
	// second round.
	time.Sleep(2 * time.Second)

	// The dashboard and the rules must work on a Prometheus that reads the
	// classic buckets and on one that reads the native histograms (which
	// Prometheus 2.42 does instead of the classic buckets once the feature
	// is on).
	for _, p := range []struct{ name, base string }{{"classic buckets", classic}, {"native histograms", native}} {
		t.Run("every expression answers/"+p.name, func(t *testing.T) { walkDeploy(t, p.base) })
	}

	t.Run("native histograms agree with the records", func(t *testing.T) {
		recs := waitRecords(t, g.srv, spreadIDs)
		var xs []float64
		for _, r := range recs {
			d, ok := r.FirstTextDeltaMs.Get()
			if !ok {
				t.Fatalf("record %s has no first text", r.RequestID)
			}
			xs = append(xs, d.Seconds())
		}
		sort.Float64s(xs)
		sel := `ttfx_time_to_first_text_seconds{model="spread"}`
		// The buckets Prometheus holds grow by the schema's factor.
		h := promInstant(t, native, `sum(`+sel+`)`)
		if len(h.histograms) != 1 || len(h.histograms[0]) < 5 {
			t.Fatalf("native histogram of %s: %+v (is the feature on, and the family native?)", sel, h)
		}
		growth := 1 + telemetry.NativeRelativeError
		for _, b := range h.histograms[0] {
			lo, _ := strconv.ParseFloat(b[1].(string), 64)
			hi, _ := strconv.ParseFloat(b[2].(string), 64)
			if lo > 0 && math.Abs(hi/lo-growth) > 1e-9 {
				t.Fatalf("bucket (%v, %v] grows by %v, want %v (schema 3)", lo, hi, hi/lo, growth)
			}
		}
		for _, q := range []float64{0.5, 0.9, 0.99} {
			r := promInstant(t, native, fmt.Sprintf(`histogram_quantile(%g, sum(%s))`, q, sel))
			if r.status != "success" || !r.hasNumber() {
				t.Fatalf("q%g: %+v", q, r)
			}
			est := r.values[0]
			// The nearest-rank record is in the bucket that holds the
			// estimate, so they differ by less than one bucket's growth.
			want := xs[int(math.Ceil(q*float64(len(xs))))-1]
			rel := math.Abs(est-want) / want
			t.Logf("p%g first text: native histogram %.4f s, records %.4f s (nearest rank of %d): relative error %.2f%% (bound %.2f%%)",
				q*100, est, want, len(xs), rel*100, telemetry.NativeRelativeError*100)
			if rel >= telemetry.NativeRelativeError {
				t.Errorf("p%g: native %.4f s vs records %.4f s: %.2f%% over the %.2f%% bound", q*100, est, want, rel*100, telemetry.NativeRelativeError*100)
			}
		}
		// The classic buckets are still served beside them.
		classicSel := `sum(` + strings.Replace(sel, "{", "_bucket{", 1) + `)`
		if r := promInstant(t, classic, classicSel); !r.hasNumber() {
			t.Errorf("classic buckets missing: %+v", r)
		}
		// What a Prometheus with the feature on keeps of them depends on
		// its version (scrape_classic_histograms, 2.45+): logged, for the
		// README's advice.
		t.Logf("classic buckets in the native-histogram Prometheus: %d samples", len(promInstant(t, native, classicSel).values))
	})
}

// doNonStream sends one non-streaming chat request for model and returns
// its request id.
func (g *gateway) doNonStream(model string) (string, error) {
	req, _ := http.NewRequest("POST", g.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","stream":false,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+g.client)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("non-streaming %s: status %d", model, resp.StatusCode)
	}
	return resp.Header.Get("X-Request-Id"), nil
}

// TestAlertSignals: the split the walk above relies on, so that an alert
// whose signal is empty cannot pass as "not firing".
func TestAlertSignals(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`a:b{stream="true"} > 5
  and on (channel, model, stream)
c:d > 0.05`, []string{`a:b{stream="true"}`, `c:d`}},
		{`increase(x[5m]) > 0`, []string{`increase(x[5m])`}},
		{`x / y > 0.8`, []string{`x / y`}},
		{`max by (channel, model) (e) > 0`, []string{`max by (channel, model) (e)`}},
		{`sum by (status) (rate(r{s!~"ok|and or"}[5m])) / ignoring (status) group_left sum(rate(r[5m])) > 0.05`,
			[]string{`sum by (status) (rate(r{s!~"ok|and or"}[5m])) / ignoring (status) group_left sum(rate(r[5m]))`}},
		{`a unless b`, []string{"a", "b"}},
	} {
		got := alertSignals(c.in)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("alertSignals(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// walkDeploy evaluates every PromQL expression of the Grafana dashboard and
// the rule files on the Prometheus at prom: each answers without error and
// with at least one number (routing's families: without error only), and
// every rule is loaded and healthy.
func walkDeploy(t *testing.T, prom string) {
	qs := append(dashboardQueries(t), ruleQueries(t)...)
	if len(qs) < 60 {
		t.Fatalf("only %d expressions found in deploy/", len(qs))
	}
	checked, routing := 0, 0
	for _, q := range qs {
		r := promInstant(t, prom, q.expr)
		if r.status != "success" {
			t.Errorf("%s: %s\n  %s", q.where, r.err, q.expr)
			continue
		}
		if fromRouting(q.expr) {
			routing++
			continue
		}
		exprs := q.signals
		if exprs == nil {
			exprs = []string{q.expr}
		}
		for _, e := range exprs {
			if r := promInstant(t, prom, e); r.status != "success" || !r.hasNumber() {
				t.Errorf("%s: no number (status %s %s, values %v)\n  %s", q.where, r.status, r.err, r.values, e)
			}
		}
		checked++
	}
	t.Logf("%d expressions answered with numbers; %d over routing's families answered without error", checked, routing)

	// Every rule is loaded and healthy.
	resp, err := http.Get(prom + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name      string `json:"name"`
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&rules)
	n := 0
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("rule %s: health %s %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if n != 30 {
		t.Errorf("Prometheus loaded %d rules, want 30 (24 recording, 6 alerting)", n)
	}
	// Streaming and non-streaming are told apart.
	if r := promInstant(t, prom, `count by (stream) (ttfx_requests_total)`); len(r.values) != 2 {
		t.Errorf("stream label values: %v, want true and false", r.values)
	}
}
