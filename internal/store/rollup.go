package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/sketch"
)

// Rollup levels: the time unit one rollup row summarises. Units are aligned
// to the Unix epoch (UTC), as Stats buckets are. Each level is compacted
// from the next finer one. A window reads whole days where it can and the
// coarsest units that fit at its two ends: with units of 1, 10 and 30
// minutes and 1, 3 and 6 hours an end costs at most 9+2+1+2+1+3 rows per
// key, and on average about half of that (a "last 24 hours" holds no whole
// day; read from hours it cost 24 rows per key). At volume a row's
// sketches are what a summary spends its time on, so rows per key are
// what it costs.
//
// A level's number is stored in its rows, so a level added later takes the
// next number rather than renumbering the stored ones; levelOrder lists
// them from fine to coarse.
const (
	levelMinute     = 0
	levelTenMinute  = 1
	levelHour       = 2
	levelDay        = 3
	levelSixHours   = 4
	levelHalfHour   = 5
	levelThreeHours = 6
	numLevels       = 7
)

// levelUnit is the length of a level's unit.
var levelUnit = [numLevels]time.Duration{time.Minute, 10 * time.Minute, time.Hour, 24 * time.Hour, 6 * time.Hour, 30 * time.Minute, 3 * time.Hour}

// levelOrder lists the levels from the finest unit to the coarsest.
var levelOrder = [numLevels]int{levelMinute, levelTenMinute, levelHalfHour, levelHour, levelThreeHours, levelSixHours, levelDay}

// finerLevel is the level a unit is compacted from, and read in when it is
// dirty; a minute's finer rows are its raw ones (-1).
var finerLevel = [numLevels]int{
	levelMinute:     -1,
	levelTenMinute:  levelMinute,
	levelHalfHour:   levelTenMinute,
	levelHour:       levelHalfHour,
	levelThreeHours: levelHour,
	levelSixHours:   levelThreeHours,
	levelDay:        levelSixHours,
}

// rollupKey is what one rollup row's records share besides their time
// unit: every dimension Stats groups or filters by, and the terminal
// status. Strings are cleaned as the records' columns are, so a key equals
// the columns of the records it summarises.
type rollupKey struct {
	api, route, model, group, channel, region, provider string
	stream                                              bool
	status                                              string
}

func keyOf(r *record.Record) rollupKey {
	return rollupKey{
		api: clean(r.API, maxNameLen), route: clean(r.Route, maxNameLen), model: clean(r.Model, maxNameLen),
		group: clean(r.Group, maxNameLen), channel: clean(r.Channel, maxNameLen), region: clean(r.Region, maxNameLen),
		provider: clean(r.Provider, maxNameLen), stream: r.Stream, status: clean(r.Status, maxNameLen),
	}
}

// dim returns the key's value of a Dimensions column.
func (k *rollupKey) dim(col string) string {
	switch col {
	case "api":
		return k.api
	case "route":
		return k.route
	case "model":
		return k.model
	case "group_name":
		return k.group
	case "channel":
		return k.channel
	case "region":
		return k.region
	case "provider":
		return k.provider
	case "stream":
		return strconv.FormatBool(k.stream)
	case "status":
		return k.status
	}
	return ""
}

// rollupKeyColumns are the key's columns in the rollups table, in the
// order of rollupKey's fields.
var rollupKeyColumns = []string{"api", "route", "model", "group_name", "channel", "region", "provider", "stream", "status"}

// labelCounts counts diagnosis labels: at any position and as the primary
// verdict.
type labelCounts map[string]LabelCount

func (l labelCounts) add(o labelCounts) {
	for k, v := range o {
		c := l[k]
		c.Count += v.Count
		c.Primary += v.Primary
		l[k] = c
	}
}

// encodeLabels writes label counts as "label=count/primary" joined by
// commas, sorted by label: a row is read far more often than it is
// written, and this parses several times faster than JSON. Diagnosis labels
// are identifiers of lower-case letters and underscores (rule labels and
// terminal statuses); a label with any other character cannot be written
// here and is left out rather than corrupt the row.
func encodeLabels(l labelCounts) string {
	if len(l) == 0 {
		return ""
	}
	names := make([]string, 0, len(l))
	for k := range l {
		if k != "" && !strings.ContainsAny(k, ",=/") {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		c := l[k]
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(c.Count))
		b.WriteByte('/')
		b.WriteString(strconv.Itoa(c.Primary))
	}
	return b.String()
}

// addLabels adds what encodeLabels wrote to l, skipping malformed parts.
func addLabels(l labelCounts, s string) {
	for s != "" {
		var part string
		part, s, _ = strings.Cut(s, ",")
		name, counts, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		cs, ps, ok := strings.Cut(counts, "/")
		if !ok {
			continue
		}
		c, err1 := strconv.Atoi(cs)
		p, err2 := strconv.Atoi(ps)
		if err1 != nil || err2 != nil {
			continue
		}
		v := l[name]
		v.Count += c
		v.Primary += p
		l[name] = v
	}
}

// rollupCell is the summary of one rollup row: its records' count, their
// count per terminal status, labels and one sketch per StatFields entry
// (nil while no value was added).
type rollupCell struct {
	count    int64
	statuses map[string]int64
	labels   labelCounts
	sk       []*sketch.Sketch
}

func newRollupCell() *rollupCell {
	return &rollupCell{statuses: map[string]int64{}, labels: labelCounts{}, sk: make([]*sketch.Sketch, len(StatFields))}
}

// add adds one record.
func (c *rollupCell) add(r *record.Record) {
	c.count++ // a minute row's status is in its key: statuses stay for compaction to fill
	for i, l := range r.Diagnosis[:min(len(r.Diagnosis), maxLabels)] {
		l = clean(l, maxNameLen)
		v := c.labels[l]
		v.Count++
		if i == 0 {
			v.Primary++
		}
		c.labels[l] = v
	}
	for i := range StatFields {
		if v, ok := StatFields[i].of(r); ok {
			if c.sk[i] == nil {
				c.sk[i] = new(sketch.Sketch)
			}
			c.sk[i].Add(v)
		}
	}
}

// mergeRow adds a stored row's summary: its count, of status (a row keyed
// by status) or of the statuses its statuses column counts (a row of a
// projection without the status), labels and encoded sketches.
func (c *rollupCell) mergeRow(status string, count int64, statuses, labels string, sketches [][]byte) error {
	c.count += count
	if statuses != "" {
		addStatuses(c.statuses, statuses)
	} else {
		c.statuses[status] += count
	}
	addLabels(c.labels, labels)
	for i, b := range sketches {
		if len(b) == 0 {
			continue
		}
		if c.sk[i] == nil {
			c.sk[i] = new(sketch.Sketch)
		}
		if err := c.sk[i].MergeBinary(b); err != nil {
			return fmt.Errorf("rollup field %s: %w", StatFields[i].Name, err)
		}
	}
	return nil
}

// merge adds o's summary to c.
func (c *rollupCell) merge(o *rollupCell) {
	c.count += o.count
	for k, n := range o.statuses {
		c.statuses[k] += n
	}
	c.labels.add(o.labels)
	for i, sk := range o.sk {
		if sk == nil {
			continue
		}
		if c.sk[i] == nil {
			c.sk[i] = new(sketch.Sketch)
		}
		c.sk[i].Merge(sk)
	}
}

// statusEscaper keeps the separators of the statuses column out of a
// status: terminal statuses are identifiers, but a record's status is
// stored as it came.
var statusEscaper, statusUnescaper = strings.NewReplacer("%", "%25", ",", "%2C", "=", "%3D"),
	strings.NewReplacer("%25", "%", "%2C", ",", "%3D", "=")

// encodeStatuses writes per-status counts as "status=count" joined by
// commas, sorted by status.
func encodeStatuses(m map[string]int64) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(statusEscaper.Replace(k))
		b.WriteByte('=')
		b.WriteString(strconv.FormatInt(m[k], 10))
	}
	return b.String()
}

// eachStatus calls fn with each status and count that encodeStatuses
// wrote in s, skipping malformed parts. The status is only valid during
// the call.
func eachStatus(s string, fn func(status string, n int64)) {
	for s != "" {
		var part string
		part, s, _ = strings.Cut(s, ",")
		name, ns, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			continue
		}
		if strings.IndexByte(name, '%') >= 0 {
			name = statusUnescaper.Replace(name)
		}
		fn(name, n)
	}
}

// addStatuses adds what encodeStatuses wrote to m.
func addStatuses(m map[string]int64, s string) {
	eachStatus(s, func(status string, n int64) { m[status] += n })
}

// A projection is the set of key dimensions a compacted rollup row keeps
// (a bit per rollupKeyColumns entry); the others are merged away. A
// compacted unit (ten minutes, an hour, a day) is written once per
// projection, so that a summary reads the coarsest rows that still hold
// every dimension it filters or groups by: the dashboard's overview of a
// week reads a few rows per hour, not one per key and status. The rows of
// projection p at level l are stored with level l + projStride×p;
// projection 0, every dimension and the status, is what levels 1 to 3
// always held. Minute rows are written at ingest with projection 0 only,
// per writer ("raw" minute rows); a closed minute is compacted into the
// other projections (level 10×p), as coarser units are.
type projection uint16

const projStride = 10

func projectionOf(cols ...string) projection {
	var p projection
	for _, c := range cols {
		i := slices.Index(rollupKeyColumns, c)
		if i < 0 {
			panic("rollup: no key column " + c)
		}
		p |= 1 << i
	}
	return p
}

// projections, finest first. Rows of a projection without the status count
// their records per status in the statuses column.
var projections = []projection{
	projectionOf(rollupKeyColumns...),
	projectionOf("api", "route", "model", "group_name", "channel", "region", "provider", "stream"),
	projectionOf("model", "channel", "group_name", "stream"),
	projectionOf("model", "group_name", "stream"),
	projectionOf("channel", "group_name", "stream"),
	projectionOf("group_name", "stream"),
	// Without the group, for summaries over every group (an admin's):
	// the traffic of several groups in one row per model or channel.
	projectionOf("model", "stream"),
	projectionOf("channel", "stream"),
	projectionOf("stream"),
	projectionOf("model", "channel", "stream"), // the channels view's grouping
}

func (p projection) has(col string) bool { return p&projectionOf(col) != 0 }

// storedLevel is the level column of the rows of projection p at level;
// the raw minute rows are projection 0 of the minute level.
func storedLevel(level, p int) int64 { return int64(level + projStride*p) }

// storedLevels lists the level column's values of level's rows, every
// projection's.
func storedLevels(level int) []any {
	var ls []any
	for p := range projections {
		ls = append(ls, storedLevel(level, p))
	}
	return ls
}

// project returns k with the dimensions p does not keep emptied.
func (k rollupKey) project(p projection) rollupKey {
	for i, f := range []*string{&k.api, &k.route, &k.model, &k.group, &k.channel, &k.region, &k.provider} {
		if p&(1<<i) == 0 {
			*f = ""
		}
	}
	if !p.has("stream") {
		k.stream = false
	}
	if !p.has("status") {
		k.status = ""
	}
	return k
}

// projectionFor returns the coarsest projection (an index in projections)
// that keeps every dimension q filters by and every group column of acc.
func projectionFor(q *StatsQuery, dimCols []string) int {
	var need projection
	for _, c := range dimCols {
		need |= projectionOf(c)
	}
	f := &q.Filter
	for _, c := range []struct{ col, v string }{{"model", f.Model}, {"channel", f.Channel}, {"group_name", f.Group}, {"status", f.Status}} {
		if c.v != "" {
			need |= projectionOf(c.col)
		}
	}
	if f.Stream != nil {
		need |= projectionOf("stream")
	}
	// The coarsest that holds them: the fewest dimensions kept.
	best := 0
	for p := 1; p < len(projections); p++ {
		if projections[p]&need == need && bits.OnesCount16(uint16(projections[p])) < bits.OnesCount16(uint16(projections[best])) {
			best = p
		}
	}
	return best
}

// projectCells makes, of the cells of one unit keyed by every dimension
// and status, the cells of every projection.
func projectCells(full map[rollupKey]*rollupCell) []map[rollupKey]*rollupCell {
	out := make([]map[rollupKey]*rollupCell, len(projections))
	out[0] = full
	for p := 1; p < len(projections); p++ {
		m := map[rollupKey]*rollupCell{}
		for k, c := range full {
			pk := k.project(projections[p])
			pc := m[pk]
			if pc == nil {
				pc = newRollupCell()
				m[pk] = pc
			}
			pc.merge(c)
		}
		out[p] = m
	}
	return out
}

// unitKey is a rollup row's identity within one level and writer.
type unitKey struct {
	start int64 // start of the unit, Unix ns
	key   rollupKey
}

// newWriterID returns a random id for the minute rows of one open store:
// each gateway process writes rows of its own, so gateways sharing a
// database never update the same row.
func newWriterID() string {
	var b [6]byte
	rand.Read(b[:])
	return "w" + hex.EncodeToString(b[:])
}

// floorUnit returns the start of the unit of length u holding ns.
func floorUnit(ns int64, u time.Duration) int64 { return floorDiv(ns, int64(u)) * int64(u) }

// rollupTable is the rollups table's columns in the order rollupArgs
// writes them.
var rollupTable = func() []column {
	cs := slices.Concat(cols(intCol, "level", "start_ns"),
		cols(textCol, "api", "route", "model", "group_name", "channel", "region", "provider"),
		cols(boolCol, "stream"), cols(textCol, "status", "writer"), cols(intCol, "count"), cols(textCol, "labels"))
	for _, f := range StatFields {
		cs = append(cs, column{f.rollupCol(), bytesCol})
	}
	return append(cs, column{"statuses", textCol}) // added by 0006_projections.sql
}()

// rollupUpsert is the conflict clause that replaces a row with the merged
// one the statement carries.
var rollupUpsert = func() string {
	set := []string{"count = excluded.count", "labels = excluded.labels", "statuses = excluded.statuses"}
	for _, f := range StatFields {
		c := f.rollupCol()
		set = append(set, c+" = excluded."+c)
	}
	return "ON CONFLICT (level, start_ns, " + strings.Join(rollupKeyColumns, ", ") + ", writer) DO UPDATE SET " + strings.Join(set, ", ")
}()

// rollupArgs appends the arguments of one rollup row, at its stored level:
// a row of a projection without the status (p > 0) counts its records per
// status.
func rollupArgs(args []any, level int, p int, start int64, k *rollupKey, writer string, c *rollupCell) ([]any, error) {
	statuses := ""
	if p > 0 {
		statuses = encodeStatuses(c.statuses)
	}
	args = append(args, storedLevel(level, p), start, k.api, k.route, k.model, k.group, k.channel, k.region, k.provider,
		k.stream, k.status, writer, c.count, encodeLabels(c.labels))
	for _, s := range c.sk {
		if s == nil || s.Count() == 0 {
			args = append(args, nil)
			continue
		}
		b, err := s.AppendBinary(nil)
		if err != nil {
			return nil, err
		}
		args = append(args, b)
	}
	return append(args, statuses), nil
}

// selectRollup is the column list rollup rows are read with by
// scanRollup: the unit, the key, count, labels and every sketch.
var selectRollup = "level, start_ns, " + strings.Join(rollupKeyColumns, ", ") + ", count, labels, statuses, " + func() string {
	var cs []string
	for _, f := range StatFields {
		cs = append(cs, f.rollupCol())
	}
	return strings.Join(cs, ", ")
}()

// scannedRollup is one rollup row as read by scanRollup. The sketches are
// only valid until the next scan.
type scannedRollup struct {
	level    int
	start    int64
	key      rollupKey
	count    int64
	labels   string
	statuses string
	sketches []sql.RawBytes
	dest     []any
}

func newScannedRollup() *scannedRollup {
	r := &scannedRollup{sketches: make([]sql.RawBytes, len(StatFields))}
	var stream any
	r.dest = []any{&r.level, &r.start, &r.key.api, &r.key.route, &r.key.model, &r.key.group, &r.key.channel,
		&r.key.region, &r.key.provider, &stream, &r.key.status, &r.count, &r.labels, &r.statuses}
	for i := range r.sketches {
		r.dest = append(r.dest, &r.sketches[i])
	}
	return r
}

func (r *scannedRollup) scan(rows *sql.Rows) error {
	var stream any
	r.dest[9] = &stream
	if err := rows.Scan(r.dest...); err != nil {
		return err
	}
	switch v := stream.(type) {
	case bool:
		r.key.stream = v
	case int64:
		r.key.stream = v != 0
	default:
		return fmt.Errorf("rollup stream flag of type %T", stream)
	}
	return nil
}

// bytesOf returns the scanned sketches as [][]byte without copying.
func (r *scannedRollup) bytesOf() [][]byte {
	out := make([][]byte, len(r.sketches))
	for i, b := range r.sketches {
		out[i] = b
	}
	return out
}

// writeRollups adds recs — the records this transaction inserted — to the
// minute rows of writer, and marks their coarser units dirty, in tx. The
// minute rows it changes are read, merged with the records and written
// back whole (a sketch cannot be added to in SQL); as only one insert at a
// time writes a writer's rows (sqlStore.lanes), no update is lost.
func writeRollups(ctx context.Context, tx *sql.Tx, d dialect, writer string, recs []*record.Record) error {
	if len(recs) == 0 {
		return nil
	}
	cells := map[unitKey]*rollupCell{}
	var minutes []int64
	for _, r := range recs {
		k := unitKey{start: floorUnit(r.Timestamp.UnixNano(), time.Minute), key: keyOf(r)}
		c := cells[k]
		if c == nil {
			c = newRollupCell()
			cells[k] = c
			if !slices.Contains(minutes, k.start) {
				minutes = append(minutes, k.start)
			}
		}
		c.add(r)
	}
	slices.Sort(minutes)

	// The stored rows of these minutes, merged into the batch's.
	sr := newScannedRollup()
	err := readMinuteRollups(ctx, tx, d.stmts, writer, minutes, func(rows *sql.Rows) error {
		if err := sr.scan(rows); err != nil {
			return err
		}
		if c := cells[unitKey{start: sr.start, key: sr.key}]; c != nil {
			return c.mergeRow(sr.key.status, sr.count, sr.statuses, sr.labels, sr.bytesOf())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read rollups: %w", err)
	}

	// Write them back, in key order so that the statement text and the
	// locks it takes do not depend on map order.
	keys := make([]unitKey, 0, len(cells))
	for k := range cells {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, compareUnitKeys)
	var rargs []any
	for _, k := range keys {
		if rargs, err = rollupArgs(rargs, levelMinute, 0, k.start, &k.key, writer, cells[k]); err != nil {
			return fmt.Errorf("write rollups: %w", err)
		}
	}
	if _, err := insertRows(ctx, tx, d, "rollups", rollupTable, rargs, rollupUpsert, ""); err != nil {
		return fmt.Errorf("write rollups: %w", err)
	}
	return markDirty(ctx, tx, d, minutes, writer)
}

// readMinuteRollups calls each for every stored minute row of writer whose
// start is in minutes. The minutes go in IN lists of a few fixed lengths,
// padded with their last minute, so that the statements stay prepared in
// stmts: SQLite otherwise parses the query at every write, which was about
// a tenth of the CPU of writing one record (issue 15).
func readMinuteRollups(ctx context.Context, tx *sql.Tx, stmts *stmtCache, writer string, minutes []int64, each func(*sql.Rows) error) error {
	for len(minutes) > 0 {
		n := min(len(minutes), 64)
		size := 64
		for _, c := range [...]int{1, 4, 16} {
			if n <= c {
				size = c
				break
			}
		}
		args := make([]any, 0, 1+size)
		args = append(args, writer)
		for i := range size {
			args = append(args, minutes[min(i, n-1)])
		}
		if err := queryCached(ctx, tx, stmts, minuteRollupsQuery(size), args, each); err != nil {
			return err
		}
		minutes = minutes[n:]
	}
	return nil
}

// minuteRollupsQuery is the query of readMinuteRollups for an IN list of n.
func minuteRollupsQuery(n int) string {
	key := "minute-rollups/" + strconv.Itoa(n)
	if q, ok := insertSQL.Load(key); ok {
		return q.(string)
	}
	marks := make([]string, n)
	for i := range marks {
		marks[i] = "$" + strconv.Itoa(i+2)
	}
	q := "SELECT " + selectRollup + " FROM rollups WHERE level = 0 AND writer = $1 AND start_ns IN (" + strings.Join(marks, ", ") + ")"
	insertSQL.Store(key, q)
	return q
}

// markDirty marks minutes and their coarser units dirty for writer. The
// update of an existing mark (rather than doing nothing) takes its row lock
// on PostgreSQL, so that a compaction claiming the mark waits for this
// transaction and then reads what it wrote (see compactUnit).
func markDirty(ctx context.Context, tx *sql.Tx, d dialect, minutes []int64, writer string) error {
	type unit struct {
		level int
		start int64
	}
	var args []any
	seen := map[unit]bool{}
	for _, m := range minutes {
		for level := levelMinute; level < numLevels; level++ {
			u := unit{level, floorUnit(m, levelUnit[level])}
			if !seen[u] {
				seen[u] = true
				args = append(args, int64(level), u.start, writer, int64(1))
			}
		}
	}
	_, err := insertRows(ctx, tx, d, "rollup_dirty", dirtyTable, args,
		"ON CONFLICT (level, start_ns, writer) DO UPDATE SET seq = rollup_dirty.seq + 1", "")
	if err != nil {
		return fmt.Errorf("mark rollups dirty: %w", err)
	}
	return nil
}

var dirtyTable = slices.Concat(cols(intCol, "level", "start_ns"), cols(textCol, "writer"), cols(intCol, "seq"))

func compareUnitKeys(a, b unitKey) int {
	if c := cmpInt(a.start, b.start); c != 0 {
		return c
	}
	return compareKeys(&a.key, &b.key)
}

func compareKeys(a, b *rollupKey) int {
	for _, p := range [][2]string{{a.api, b.api}, {a.route, b.route}, {a.model, b.model}, {a.group, b.group},
		{a.channel, b.channel}, {a.region, b.region}, {a.provider, b.provider}} {
		if c := strings.Compare(p[0], p[1]); c != 0 {
			return c
		}
	}
	if a.stream != b.stream {
		if a.stream {
			return 1
		}
		return -1
	}
	return strings.Compare(a.status, b.status)
}

// backfillWriter names the minute rollup rows made from the records stored
// before rollups existed.
const backfillWriter = "backfill"

// backfillRollups makes the rollups of every record already stored, when
// a database made before rollups (0003) is migrated: reads of
// the summaries come from rollups only, so records without them would be
// missing from every answer. It reads the records in time order, a page at
// a time, through the ingest path (writeRollups), in the migration's
// transaction.
func backfillRollups(ctx context.Context, tx *sql.Tx, d dialect) error {
	// Rollups are written with their records since 0003: a database that
	// has any was made or migrated since, and has all of them.
	var have int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM rollups LIMIT 1) r`).Scan(&have); err != nil {
		return fmt.Errorf("backfill rollups: %w", err)
	}
	if have > 0 {
		return nil
	}
	const page = 5000
	var lastTS int64 = math.MinInt64
	lastID := ""
	for {
		rows, err := tx.QueryContext(ctx, "SELECT "+selectRecord+" FROM requests r WHERE (r.timestamp_ns, r.request_id) > ($1, $2)"+
			" ORDER BY r.timestamp_ns, r.request_id LIMIT $3", lastTS, lastID, page)
		if err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		var recs []record.Record
		for rows.Next() {
			r, err := scanRecord(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("backfill rollups: %w", err)
			}
			recs = append(recs, r)
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		if len(recs) == 0 {
			return nil
		}
		if err := readLabels(ctx, tx, recs); err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		ptrs := make([]*record.Record, len(recs))
		for i := range recs {
			ptrs[i] = &recs[i]
		}
		if err := writeRollups(ctx, tx, d, backfillWriter, ptrs); err != nil {
			return fmt.Errorf("backfill rollups: %w", err)
		}
		last := &recs[len(recs)-1]
		lastTS, lastID = last.Timestamp.UnixNano(), last.RequestID
		if len(recs) < page {
			return nil
		}
	}
}

// readLabels fills the diagnosis labels of recs, in order.
func readLabels(ctx context.Context, q querier, recs []record.Record) error {
	byID := make(map[string]*record.Record, len(recs))
	args := make([]any, len(recs))
	marks := make([]string, len(recs))
	for i := range recs {
		byID[recs[i].RequestID] = &recs[i]
		args[i] = recs[i].RequestID
		marks[i] = "$" + strconv.Itoa(i+1)
	}
	rows, err := q.QueryContext(ctx, `SELECT request_id, label FROM request_labels WHERE request_id IN (`+
		strings.Join(marks, ", ")+`) ORDER BY request_id, position`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, label string
		if err := rows.Scan(&id, &label); err != nil {
			return err
		}
		if r := byID[id]; r != nil {
			r.Diagnosis = append(r.Diagnosis, label)
		}
	}
	return rows.Err()
}
