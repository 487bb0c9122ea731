package store

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
)

// PercentileMethod names, for every answer that carries percentiles, how
// they were computed. ttfx computes them itself from the stored values, so
// SQLite and PostgreSQL give the same numbers for the same records.
const PercentileMethod = "R-7: linear interpolation between closest ranks (the default of numpy.percentile, " +
	"R's quantile type 7 and Excel's PERCENTILE.INC). The n present values are sorted x[0] ≤ … ≤ x[n−1]; " +
	"for p in [0,1], h = (n−1)·p and the percentile is x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]). " +
	"Absent values are excluded and counted in absent; computed by ttfx in Go, identically on SQLite and PostgreSQL."

// StatField is a per-request value that Stats summarises.
type StatField struct {
	Name       string // the contract name (SPEC.md §1)
	Definition string // one sentence: what it measures, from which origin
	cols       []string
	// derive computes the value from cols' values, each valid; nil means
	// the value is cols[0] itself.
	derive func(v []float64) float64
}

// StatFields lists the fields Stats summarises, in the order of the
// request timeline.
var StatFields = []StatField{
	{Name: "auth_ms", cols: []string{"auth_ms"},
		Definition: "Duration of authenticating the client key (local phase, its own origin)."},
	{Name: "distribution_ms", cols: []string{"distribution_ms"},
		Definition: "Duration of channel selection and routing (local phase, its own origin)."},
	{Name: "body_read_ms", cols: []string{"body_read_ms"},
		Definition: "Duration of reading the client's request body (local phase, its own origin; finds slow uploads)."},
	{Name: "upstream_headers_ms", cols: []string{"upstream_headers_ms"},
		Definition: "t2 − t1 of the relayed attempt: upstream request start to upstream response headers (origin t1, not t0; network, admission, queue)."},
	{Name: "first_sse_event_ms", cols: []string{"first_sse_event_ms"},
		Definition: "t3 − t0: gateway receipt to the first SSE event carrying data (comments never count; it may be metadata only)."},
	{Name: "first_response_ms", cols: []string{"first_response_ms"},
		Definition: "t4 − t0: gateway receipt to the first effective content or action — text, reasoning or tool-call arguments with a non-whitespace character."},
	{Name: "first_text_delta_ms", cols: []string{"first_text_delta_ms"},
		Definition: "t5 − t0: gateway receipt to the first visible text delta from upstream (time to first visible text)."},
	{Name: "first_text_sent_ms", cols: []string{"first_text_sent_ms"},
		Definition: "Gateway receipt to the first visible text flushed to the client."},
	{Name: "relay_lag_ms", cols: []string{"first_text_sent_ms", "first_text_delta_ms"},
		derive:     func(v []float64) float64 { return v[0] - v[1] },
		Definition: "first_text_sent_ms − first_text_delta_ms of the same request (both from t0): how long the gateway held the first visible text."},
	{Name: "upstream_done_ms", cols: []string{"upstream_done_ms"},
		Definition: "t6 − t0: gateway receipt to the upstream body finishing or closing, for any reason (closed is not succeeded)."},
	{Name: "total_handler_ms", cols: []string{"total_handler_ms"},
		Definition: "t7 − t0: gateway receipt to the last byte written and flushed to the client; the gateway's end-to-end latency."},
	{Name: "visible_output_tps", cols: []string{"visible_output_tps"},
		Definition: "Visible output tokens / visible generation window (t6 − t5) in seconds, per request; absent without visible text or with fewer than 2 visible tokens. Not aggregate throughput."},
	{Name: "inter_token_latency_ms", cols: []string{"inter_token_latency_ms"},
		Definition: "Visible generation window (t6 − t5) / (visible output tokens − 1)."},
	{Name: "max_output_gap_ms", cols: []string{"max_output_gap_ms"},
		Definition: "Longest wait between two consecutive events carrying content (text, reasoning or tool arguments), from t4 on; heartbeats and metadata do not end a gap (its own origin; absent with fewer than two such events)."},
	{Name: "request_wait_ms", cols: []string{"request_wait_ms"},
		Definition: "How long the request waited in the gateway before t0: from its first byte read on the connection to the handler starting (local phase, its own origin)."},
}

// CountDefinitions define the counts every group of Stats carries.
var CountDefinitions = map[string]string{
	"count":      "Records in the group: requests received in the window that match the filter.",
	"errors":     "Records whose terminal status is not ok (SPEC.md §5).",
	"error_rate": "errors / count.",
	"statuses":   "Records per terminal status.",
	"labels":     "Per diagnosis label: records carrying it at any position (count) and as the primary verdict (primary).",
	"absent":     "Records in the group for which the field did not happen (its mark is absent); excluded from the field's percentiles.",
}

// Dimensions are the record attributes Stats can group by, with their
// columns.
var Dimensions = map[string]string{
	"model":    "model",
	"channel":  "channel",
	"group":    "group_name",
	"route":    "route",
	"api":      "api",
	"region":   "region",
	"provider": "provider",
	"stream":   "stream",
}

// dimValue is a group key's value of column col as the answer shows it:
// the stream flag is "true" or "false" on both engines (SQLite hands a
// BOOLEAN over as 1 or 0).
func dimValue(col string, v any) string {
	if col == "stream" {
		switch x := v.(type) {
		case bool:
			return strconv.FormatBool(x)
		case int64:
			return strconv.FormatBool(x != 0)
		}
	}
	return asString(v)
}

// Bounds of a Stats answer. Stats holds every present value of the records
// it reads until it has summarised them (about 100 bytes a record with all
// fields), so what one call may read is bounded, and so is how many run at
// once: together they bound the memory and CPU that callers of /api/stats
// can make the gateway spend.
const (
	MaxStatsGroups = 10000 // groups (× buckets) in one answer
	MinBucket      = time.Second
	// MaxStatsRows is the most records one Stats call reads; past it the
	// call fails with ErrBadQuery rather than hold more.
	MaxStatsRows = 2_000_000
	// MaxConcurrentStats is how many Stats calls one store runs at once;
	// further calls wait for a turn (or for their context to end).
	MaxConcurrentStats = 2
)

// StatsQuery selects and groups the records Stats summarises.
type StatsQuery struct {
	Filter  Filter        // which records; Limit and Cursor are ignored
	GroupBy []string      // Dimensions to group by, in order; empty: one group
	Bucket  time.Duration // split each group into time buckets aligned to the Unix epoch (UTC); 0: no buckets
	Fields  []string      // StatFields names to summarise; empty: all
}

// Stats is the answer of Store.Stats.
type Stats struct {
	PercentileMethod string            `json:"percentile_method"`
	Definitions      map[string]string `json:"definitions"` // every field and count in the answer, one sentence each
	GroupBy          []string          `json:"group_by"`
	BucketMs         float64           `json:"bucket_ms,omitempty"` // bucket width; absent without buckets
	Groups           []Group           `json:"groups"`              // ordered by key, then bucket; the overflow group, if any, last
	// Truncated reports that the records made more than MaxStatsGroups
	// groups: the first MaxStatsGroups keys met have groups of their own,
	// and every further one is folded into a last group whose key values
	// are all OtherKey and which has no bucket (see TruncatedDefinition).
	Truncated bool `json:"truncated"`
}

// OtherKey is every key value of the overflow group of a truncated answer.
const OtherKey = "(other)"

// TruncatedDefinition defines Stats.Truncated, in every answer's
// definitions.
var TruncatedDefinition = fmt.Sprintf("True when the matching records form more than %d groups (× buckets): the first %[1]d met keep groups of their own "+
	"and the records of every further group are counted together in one last group whose key values are all %q and which has no bucket_start; "+
	"the counts of all groups still add up to every matching record.", MaxStatsGroups, OtherKey)

// Group is the summary of one group (and time bucket).
type Group struct {
	Key         map[string]string       `json:"key"`                   // dimension → value; empty without GroupBy
	BucketStart *time.Time              `json:"bucket_start,omitzero"` // start of the bucket; absent without buckets
	Count       int                     `json:"count"`
	Errors      int                     `json:"errors"`
	ErrorRate   float64                 `json:"error_rate"`
	Statuses    map[string]int          `json:"statuses"`
	Labels      map[string]LabelCount   `json:"labels"`
	Fields      map[string]FieldSummary `json:"fields"`
}

// LabelCount counts one diagnosis label in a group.
type LabelCount struct {
	Count   int `json:"count"`   // records carrying the label
	Primary int `json:"primary"` // records whose primary verdict it is
}

// FieldSummary summarises one field over a group. The statistics are
// absent (null) when no record of the group had the field.
type FieldSummary struct {
	Count  int      `json:"count"`  // records where the field is present
	Absent int      `json:"absent"` // records where it is absent
	Min    *float64 `json:"min"`
	Max    *float64 `json:"max"`
	Mean   *float64 `json:"mean"`
	P50    *float64 `json:"p50"`
	P90    *float64 `json:"p90"`
	P95    *float64 `json:"p95"`
	P99    *float64 `json:"p99"`
}

// Percentile returns the p-th quantile (p in [0,1]) of sorted values by the
// method of PercentileMethod. sorted must be non-empty and ascending.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	h := float64(n-1) * p
	lo := int(math.Floor(h))
	if lo >= n-1 {
		return sorted[n-1]
	}
	if lo < 0 {
		return sorted[0]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Summarize summarises the present values of a field and the count of
// records where it was absent. It reorders values.
//
// The percentiles are those of Percentile over the sorted values, but
// Summarize does not sort: it selects the few order statistics the four
// percentiles read (quickselect, linear time), which over a million values
// is several times faster than sorting them.
func Summarize(values []float64, absent int) FieldSummary {
	s := FieldSummary{Count: len(values), Absent: absent}
	n := len(values)
	if n == 0 {
		return s
	}
	lo, hi, sum := values[0], values[0], 0.0
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
		sum += v
	}
	ps := [...]float64{0.50, 0.90, 0.95, 0.99}
	// The ranks each percentile interpolates between, ascending.
	var ranks []int
	for _, p := range ps {
		k := int(math.Floor(float64(n-1) * p))
		ranks = append(ranks, k, min(k+1, n-1))
	}
	slices.Sort(ranks)
	ranks = slices.Compact(ranks)
	from := 0
	for _, k := range ranks {
		// values[:from] are all ≤ values[from:], so the rank-k value
		// lies in values[from:].
		selectKth(values[from:], k-from)
		from = k + 1
	}
	at := func(p float64) *float64 {
		h := float64(n-1) * p
		k := int(math.Floor(h))
		v := values[k]
		if k+1 < n {
			v += (h - float64(k)) * (values[k+1] - values[k])
		}
		return &v
	}
	f := func(v float64) *float64 { return &v }
	s.Min, s.Max, s.Mean = f(lo), f(hi), f(sum/float64(n))
	s.P50, s.P90, s.P95, s.P99 = at(ps[0]), at(ps[1]), at(ps[2]), at(ps[3])
	return s
}

// selectKth reorders a so that a[k] holds the value it would hold sorted,
// with no greater value before it and no smaller one after. It is
// quickselect with a median-of-three pivot, falling back to sorting a
// range that shrinks too slowly, so it stays O(n log n) at worst.
func selectKth(a []float64, k int) {
	lo, hi := 0, len(a)-1
	budget := 2 * bits.Len(uint(len(a)))
	for lo < hi {
		if budget == 0 || hi-lo < 16 {
			slices.Sort(a[lo : hi+1])
			return
		}
		budget--
		mid := lo + (hi-lo)/2
		// Median of three to a[mid].
		if a[mid] < a[lo] {
			a[mid], a[lo] = a[lo], a[mid]
		}
		if a[hi] < a[lo] {
			a[hi], a[lo] = a[lo], a[hi]
		}
		if a[hi] < a[mid] {
			a[hi], a[mid] = a[mid], a[hi]
		}
		pivot := a[mid]
		// Hoare partition: a[lo..j] ≤ pivot ≤ a[j+1..hi].
		i, j := lo-1, hi+1
		for {
			for i++; a[i] < pivot; i++ {
			}
			for j--; a[j] > pivot; j-- {
			}
			if i >= j {
				break
			}
			a[i], a[j] = a[j], a[i]
		}
		if k <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
}

// statCell accumulates one group (and bucket).
type statCell struct {
	key      []string
	bucket   int64 // bucket index; 0 without buckets
	count    int
	errors   int
	statuses map[string]int
	labels   map[string]LabelCount
	values   [][]float64 // per selected field, the present values
}

func newCell(fields int) *statCell {
	return &statCell{statuses: map[string]int{}, labels: map[string]LabelCount{}, values: make([][]float64, fields)}
}

// resolveStats checks q and returns the selected fields and group columns.
func resolveStats(q *StatsQuery) ([]*StatField, []string, error) {
	var fields []*StatField
	if len(q.Fields) == 0 {
		for i := range StatFields {
			fields = append(fields, &StatFields[i])
		}
	} else {
		for _, name := range q.Fields {
			i := slices.IndexFunc(StatFields, func(f StatField) bool { return f.Name == name })
			if i < 0 {
				return nil, nil, fmt.Errorf("%w: unknown field %q", ErrBadQuery, name)
			}
			if !slices.Contains(fields, &StatFields[i]) {
				fields = append(fields, &StatFields[i])
			}
		}
	}
	var cols []string
	for i, d := range q.GroupBy {
		c, ok := Dimensions[d]
		if !ok {
			return nil, nil, fmt.Errorf("%w: cannot group by %q", ErrBadQuery, d)
		}
		if slices.Contains(q.GroupBy[:i], d) {
			return nil, nil, fmt.Errorf("%w: %q named twice in group_by", ErrBadQuery, d)
		}
		cols = append(cols, c)
	}
	if q.Bucket != 0 && q.Bucket < MinBucket {
		return nil, nil, fmt.Errorf("%w: bucket %v is shorter than %v", ErrBadQuery, q.Bucket, MinBucket)
	}
	f := q.Filter
	if q.Bucket > 0 && !f.From.IsZero() && !f.To.IsZero() && f.To.Sub(f.From)/q.Bucket > MaxStatsGroups {
		return nil, nil, fmt.Errorf("%w: %v buckets of %v exceed %d", ErrBadQuery, f.To.Sub(f.From)/q.Bucket, q.Bucket, MaxStatsGroups)
	}
	return fields, cols, nil
}

// Stats reads the matching records' group keys, status and fields in one
// query and summarises them in Go, and counts labels with a GROUP BY; both
// queries run in one read-only transaction so they see the same records.
// Its cost grows with the records in the window (every present value is
// held while a group is summarised): it stops with ErrBadQuery past
// MaxStatsRows records, and waits while MaxConcurrentStats other calls
// run.
func (s *sqlStore) Stats(ctx context.Context, q StatsQuery) (Stats, error) {
	fields, dimCols, err := resolveStats(&q)
	if err != nil {
		return Stats{}, err
	}
	select {
	case s.statsSlots <- struct{}{}:
		defer func() { <-s.statsSlots }()
	case <-ctx.Done():
		return Stats{}, fmt.Errorf("stats: waiting for one of %d summaries running to finish: %w", MaxConcurrentStats, ctx.Err())
	}
	// The raw columns the fields read, each once.
	var raw []string
	colIdx := make([][]int, len(fields))
	for i, f := range fields {
		for _, c := range f.cols {
			j := slices.Index(raw, c)
			if j < 0 {
				j = len(raw)
				raw = append(raw, c)
			}
			colIdx[i] = append(colIdx[i], j)
		}
	}
	sel := make([]string, 0, len(dimCols)+2+len(raw))
	for _, c := range dimCols {
		sel = append(sel, "r."+c)
	}
	sel = append(sel, "r.timestamp_ns", "r.status")
	for _, c := range raw {
		sel = append(sel, "r."+c)
	}
	tx, err := s.read.BeginTx(ctx, s.d.readTx)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	defer tx.Rollback()

	b := builder{scanTime: s.d.planTime && wideWindow(ctx, tx, &q.Filter)}
	b.match(&q.Filter)

	rows, err := tx.QueryContext(ctx, "SELECT "+strings.Join(sel, ", ")+" FROM requests r"+b.where(), b.args...)
	if err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}
	bucketNs := q.Bucket.Nanoseconds()
	cells := map[string]*statCell{}
	var order []*statCell
	var overflow *statCell // the rows of keys past MaxStatsGroups; nil until there are some
	dest := make([]any, len(sel))
	vals := make([]any, len(sel))
	for i := range dest {
		dest[i] = &vals[i]
	}
	var keyBuf strings.Builder
	in := make([]float64, 2)
	scanned := 0
	for rows.Next() {
		if scanned++; scanned > s.maxStatsRows {
			rows.Close()
			return Stats{}, fmt.Errorf("%w: more than %d records match; narrow the window or filter", ErrBadQuery, s.maxStatsRows)
		}
		// Scanning into *any skips database/sql's reflective conversions;
		// both drivers hand over int64, float64, string or nil here.
		if err := rows.Scan(dest...); err != nil {
			rows.Close()
			return Stats{}, fmt.Errorf("stats: %w", err)
		}
		nd := len(dimCols)
		ts, _ := vals[nd].(int64)
		var bucket int64
		if bucketNs > 0 {
			bucket = floorDiv(ts, bucketNs)
		}
		keyBuf.Reset()
		for i := range nd {
			keyBuf.WriteString(dimValue(dimCols[i], vals[i]))
			keyBuf.WriteByte(0)
		}
		keyBuf.WriteString(strconv.FormatInt(bucket, 10))
		c := cells[keyBuf.String()]
		switch {
		case c != nil:
		case len(cells) >= MaxStatsGroups:
			// Any client can make a model name up, and unknown models
			// still get records: past the bound, new keys share one
			// group instead of failing the answer for everyone.
			if overflow == nil {
				overflow = newCell(len(fields))
				for range nd {
					overflow.key = append(overflow.key, OtherKey)
				}
			}
			c = overflow
		default:
			c = newCell(len(fields))
			c.bucket = bucket
			for i := range nd {
				c.key = append(c.key, dimValue(dimCols[i], vals[i]))
			}
			cells[keyBuf.String()] = c
			order = append(order, c)
		}
		status := asString(vals[nd+1])
		c.count++
		c.statuses[status]++
		if status != record.StatusOK {
			c.errors++
		}
		for i, f := range fields {
			ok := true
			for k, j := range colIdx[i] {
				v, present := asFloat(vals[nd+2+j])
				if !present {
					ok = false
					break
				}
				in[k] = v
			}
			if !ok {
				continue
			}
			v := in[0]
			if f.derive != nil {
				v = f.derive(in)
			}
			c.values[i] = append(c.values[i], v)
		}
	}
	if err := rows.Close(); err != nil {
		return Stats{}, fmt.Errorf("stats: %w", err)
	}

	if err := s.countLabels(ctx, tx, &q, dimCols, cells, overflow, b.scanTime); err != nil {
		return Stats{}, err
	}

	st := emptyStats(&q, fields)
	slices.SortFunc(order, func(a, b *statCell) int {
		if c := slices.Compare(a.key, b.key); c != 0 {
			return c
		}
		return cmpInt(a.bucket, b.bucket)
	})
	if overflow != nil {
		st.Truncated = true
		order = append(order, overflow)
	}
	for _, c := range order {
		g := Group{
			Key:       map[string]string{},
			Count:     c.count,
			Errors:    c.errors,
			ErrorRate: float64(c.errors) / float64(c.count),
			Statuses:  c.statuses,
			Labels:    c.labels,
			Fields:    make(map[string]FieldSummary, len(fields)),
		}
		for i, d := range q.GroupBy {
			g.Key[d] = c.key[i]
		}
		if bucketNs > 0 && c != overflow {
			t := time.Unix(0, c.bucket*bucketNs).UTC()
			g.BucketStart = &t
		}
		for i, f := range fields {
			g.Fields[f.Name] = Summarize(c.values[i], c.count-len(c.values[i]))
			c.values[i] = nil
		}
		st.Groups = append(st.Groups, g)
	}
	return st, nil
}

// wideWindow reports whether f's time range covers at least a third of the
// time the stored records span, judged from the oldest and newest
// timestamps (two index lookups). SQLite has no statistics on the spread of
// a column and always reads a time range through the index, one B-tree
// descent per row; over most of the table a plain scan is faster (a
// million-record day: 1.3–1.8 s against 3.6 s, measured). PostgreSQL's
// planner makes this choice itself.
func wideWindow(ctx context.Context, q querier, f *Filter) bool {
	rows, err := q.QueryContext(ctx, `SELECT (SELECT MIN(timestamp_ns) FROM requests), (SELECT MAX(timestamp_ns) FROM requests)`)
	if err != nil {
		return false
	}
	defer rows.Close()
	var lo, hi sql.NullInt64
	if !rows.Next() || rows.Scan(&lo, &hi) != nil || !lo.Valid || hi.Int64 <= lo.Int64 {
		return false
	}
	from, to := lo.Int64, hi.Int64
	if !f.From.IsZero() {
		from = max(from, unixNano(f.From))
	}
	if !f.To.IsZero() {
		to = min(to, unixNano(f.To))
	}
	return to > from && float64(to-from) >= float64(hi.Int64-lo.Int64)/3
}

// EmptyStats returns the answer of Stats for q when no record matches: its
// definitions and method, no groups. It is for callers that know the
// answer is empty without asking the store (a viewer asking for another
// group).
func EmptyStats(q StatsQuery) (Stats, error) {
	fields, _, err := resolveStats(&q)
	if err != nil {
		return Stats{}, err
	}
	return emptyStats(&q, fields), nil
}

func emptyStats(q *StatsQuery, fields []*StatField) Stats {
	st := Stats{
		PercentileMethod: PercentileMethod,
		Definitions:      map[string]string{},
		GroupBy:          append([]string{}, q.GroupBy...),
		Groups:           []Group{},
	}
	for k, v := range CountDefinitions {
		st.Definitions[k] = v
	}
	st.Definitions["truncated"] = TruncatedDefinition
	for _, f := range fields {
		st.Definitions[f.Name] = f.Definition
	}
	if q.Bucket > 0 {
		st.BucketMs = float64(q.Bucket.Nanoseconds()) / 1e6
	}
	return st
}

// countLabels adds the label counts of every cell with one GROUP BY. The
// bucket index is integer division of the timestamp, which both engines
// truncate toward zero; floorDiv agrees for timestamps after 1970.
func (s *sqlStore) countLabels(ctx context.Context, tx querier, q *StatsQuery, dimCols []string, cells map[string]*statCell, overflow *statCell, scanTime bool) error {
	b := builder{scanTime: scanTime}
	b.match(&q.Filter)
	var groupCols []string
	for _, c := range dimCols {
		groupCols = append(groupCols, "r."+c)
	}
	bucketExpr := "0"
	if q.Bucket > 0 {
		bucketExpr = "r.timestamp_ns / " + b.arg(q.Bucket.Nanoseconds())
	}
	groupCols = append(groupCols, bucketExpr, "l.label")
	// GROUP BY ordinals: both engines accept them, and they spare PostgreSQL
	// matching a parameterised expression against the select list.
	ordinals := make([]string, len(groupCols))
	for i := range groupCols {
		ordinals[i] = strconv.Itoa(i + 1)
	}
	query := "SELECT " + strings.Join(groupCols, ", ") + ", COUNT(*), SUM(CASE WHEN l.position = 0 THEN 1 ELSE 0 END)" +
		" FROM requests r JOIN request_labels l ON l.request_id = r.request_id" + b.where() +
		" GROUP BY " + strings.Join(ordinals, ", ")
	rows, err := tx.QueryContext(ctx, query, b.args...)
	if err != nil {
		return fmt.Errorf("stats: labels: %w", err)
	}
	defer rows.Close()
	n := len(dimCols)
	vals := make([]any, n+4)
	dest := make([]any, len(vals))
	for i := range dest {
		dest[i] = &vals[i]
	}
	var key strings.Builder
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return fmt.Errorf("stats: labels: %w", err)
		}
		key.Reset()
		for i := range n {
			key.WriteString(dimValue(dimCols[i], vals[i]))
			key.WriteByte(0)
		}
		bucket, _ := asInt(vals[n])
		key.WriteString(strconv.FormatInt(bucket, 10))
		count, _ := asInt(vals[n+2])
		primary, _ := asInt(vals[n+3])
		label := asString(vals[n+1])
		c := cells[key.String()]
		switch {
		case c != nil:
			c.labels[label] = LabelCount{Count: int(count), Primary: int(primary)}
		case overflow != nil:
			// Both queries read one snapshot, so a key the first did
			// not keep is one it folded into the overflow group, which
			// sums the labels of all of them.
			lc := overflow.labels[label]
			lc.Count += int(count)
			lc.Primary += int(primary)
			overflow.labels[label] = lc
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("stats: labels: %w", err)
	}
	return nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func asString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case float32:
		return float64(x), true
	case []byte:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(x, 64)
		return f, err == nil
	}
	return 0, false
}

func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		return int64(x), true
	case int32:
		return int64(x), true
	case []byte:
		n, err := strconv.ParseInt(string(x), 10, 64)
		return n, err == nil
	case string:
		n, err := strconv.ParseInt(x, 10, 64)
		return n, err == nil
	}
	return 0, false
}
