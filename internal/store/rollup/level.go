package rollup

import (
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
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
// next number rather than renumbering the stored ones; Order lists
// them from fine to coarse.
const (
	Minute     = 0
	TenMinutes = 1
	Hour       = 2
	Day        = 3
	SixHours   = 4
	HalfHour   = 5
	ThreeHours = 6
	NumLevels  = 7
)

// Unit is the length of a level's unit.
var Unit = [NumLevels]time.Duration{time.Minute, 10 * time.Minute, time.Hour, 24 * time.Hour, 6 * time.Hour, 30 * time.Minute, 3 * time.Hour}

// Order lists the levels from the finest unit to the coarsest.
var Order = [NumLevels]int{Minute, TenMinutes, HalfHour, Hour, ThreeHours, SixHours, Day}

// Finer is the level a unit is compacted from, and read in when it is
// dirty; minutes have raw rows only, written at ingest (-1).
var Finer = [NumLevels]int{
	Minute:     -1,
	TenMinutes: Minute,
	HalfHour:   TenMinutes,
	Hour:       HalfHour,
	ThreeHours: Hour,
	SixHours:   ThreeHours,
	Day:        SixHours,
}

// Key is what one rollup row's records share besides their time
// unit: every dimension Stats groups or filters by, and the terminal
// status. Strings are cleaned as the records' columns are, so a key equals
// the columns of the records it summarises.
type Key struct {
	API, Route, Model, Group, Channel, Region, Provider string
	Stream                                              bool
	Status                                              string
}

func KeyOf(r *record.Record) Key {
	return Key{
		API: store.Clean(r.API, store.MaxNameLen), Route: store.Clean(r.Route, store.MaxNameLen), Model: store.Clean(r.Model, store.MaxNameLen),
		Group: store.Clean(r.Group, store.MaxNameLen), Channel: store.Clean(r.Channel, store.MaxNameLen), Region: store.Clean(r.Region, store.MaxNameLen),
		Provider: store.Clean(r.Provider, store.MaxNameLen), Stream: r.Stream, Status: store.Clean(r.Status, store.MaxNameLen),
	}
}

// dim returns the key's value of a Dimensions column.
func (k *Key) Dim(col string) string {
	switch col {
	case "api":
		return k.API
	case "route":
		return k.Route
	case "model":
		return k.Model
	case "group_name":
		return k.Group
	case "channel":
		return k.Channel
	case "region":
		return k.Region
	case "provider":
		return k.Provider
	case "stream":
		return strconv.FormatBool(k.Stream)
	case "status":
		return k.Status
	}
	return ""
}

// KeyColumns are the key's columns in the rollups table, in the
// order of Key's fields.
var KeyColumns = []string{"api", "route", "model", "group_name", "channel", "region", "provider", "stream", "status"}

// A projection is the set of key dimensions a compacted rollup row keeps
// (a bit per KeyColumns entry); the others are merged away. A
// compacted unit (ten minutes, an hour, a day) is written once per
// projection, so that a summary reads the coarsest rows that still hold
// every dimension it filters or groups by: the dashboard's overview of a
// week reads a few rows per hour, not one per key and status. The rows of
// projection p at level l are stored with level l + ProjStride×p;
// projection 0, every dimension and the status, is what levels 1 to 3
// always held. Minute rows are written at ingest with projection 0 only,
// per writer ("raw" minute rows), and are never compacted: a minute's
// projections cost about as many rows again as its raw rows for every
// projection (at a few records a minute, a row each), two thirds of the
// rollups' bytes, to spare a summary the raw rows of the minutes at its two
// ends. Databases made before migration 0010 held them as levels 10×p.
type Projection uint16

const ProjStride = 10

func ProjectionOf(cols ...string) Projection {
	var p Projection
	for _, c := range cols {
		i := slices.Index(KeyColumns, c)
		if i < 0 {
			panic("rollup: no key column " + c)
		}
		p |= 1 << i
	}
	return p
}

// projections, finest first. Rows of a projection without the status count
// their records per status in the statuses column.
var Projections = []Projection{
	ProjectionOf(KeyColumns...),
	ProjectionOf("api", "route", "model", "group_name", "channel", "region", "provider", "stream"),
	ProjectionOf("model", "channel", "group_name", "stream"),
	ProjectionOf("model", "group_name", "stream"),
	ProjectionOf("channel", "group_name", "stream"),
	ProjectionOf("group_name", "stream"),
	// Without the group, for summaries over every group (an admin's):
	// the traffic of several groups in one row per model or channel.
	ProjectionOf("model", "stream"),
	ProjectionOf("channel", "stream"),
	ProjectionOf("stream"),
	ProjectionOf("model", "channel", "stream"), // the channels view's grouping
}

func (p Projection) Has(col string) bool { return p&ProjectionOf(col) != 0 }

// StoredLevel is the level column of the rows of projection p at level;
// the raw minute rows are projection 0 of the minute level.
func StoredLevel(level, p int) int64 { return int64(level + ProjStride*p) }

// StoredLevels lists the level column's values of level's rows, every
// projection's.
func StoredLevels(level int) []any {
	var ls []any
	for p := range Projections {
		ls = append(ls, StoredLevel(level, p))
	}
	return ls
}

// project returns k with the dimensions p does not keep emptied.
func (k Key) Project(p Projection) Key {
	for i, f := range []*string{&k.API, &k.Route, &k.Model, &k.Group, &k.Channel, &k.Region, &k.Provider} {
		if p&(1<<i) == 0 {
			*f = ""
		}
	}
	if !p.Has("stream") {
		k.Stream = false
	}
	if !p.Has("status") {
		k.Status = ""
	}
	return k
}

// ProjectionFor returns the coarsest projection (an index in projections)
// that keeps every dimension q filters by and every group column of acc.
func ProjectionFor(q *store.StatsQuery, dimCols []string) int {
	var need Projection
	for _, c := range dimCols {
		need |= ProjectionOf(c)
	}
	f := &q.Filter
	for _, c := range []struct{ col, v string }{{"model", f.Model}, {"channel", f.Channel}, {"group_name", f.Group}, {"status", f.Status}} {
		if c.v != "" {
			need |= ProjectionOf(c.col)
		}
	}
	if f.Stream != nil {
		need |= ProjectionOf("stream")
	}
	// The coarsest that holds them: the fewest dimensions kept.
	best := 0
	for p := 1; p < len(Projections); p++ {
		if Projections[p]&need == need && bits.OnesCount16(uint16(Projections[p])) < bits.OnesCount16(uint16(Projections[best])) {
			best = p
		}
	}
	return best
}

// ProjectCells makes, of the cells of one unit keyed by every dimension
// and status, the cells of every projection. Each is made from the fewest
// cells that hold its dimensions: those of a projection made before it
// that keeps them all (byDims lists such projections first), which at a
// few records a key merges far fewer sketches than the full cells would.
func ProjectCells(full map[Key]*Cell) []map[Key]*Cell { return ProjectSome(full, 0) }

// ProjectSome is ProjectCells without the projections of skip (their
// entries are nil): a compaction makes only those it stores (see Sparse,
// which ProjectedRows gives what it needs).
func ProjectSome(full map[Key]*Cell, skip uint16) []map[Key]*Cell {
	out := make([]map[Key]*Cell, len(Projections))
	out[0] = full
	for _, p := range byDims {
		if p == 0 || skip&(1<<p) != 0 {
			continue
		}
		from := full
		for q, m := range out {
			if m != nil && len(m) < len(from) && Projections[q]&Projections[p] == Projections[p] {
				from = m
			}
		}
		m := map[Key]*Cell{}
		for k, c := range from {
			pk := k.Project(Projections[p])
			pc := m[pk]
			if pc == nil {
				pc = NewCell()
				m[pk] = pc
			}
			pc.Merge(c)
		}
		out[p] = m
	}
	if skip&1 != 0 {
		out[0] = nil
	}
	return out
}

// ProjectedRows returns the rows each projection of the cells of one unit
// (keyed by every dimension and status) would have, merging nothing.
func ProjectedRows(full map[Key]*Cell) []int {
	rows := make([]int, len(Projections))
	seen := map[Key]struct{}{}
	for p, proj := range Projections {
		clear(seen)
		for k := range full {
			seen[k.Project(proj)] = struct{}{}
		}
		rows[p] = len(seen)
	}
	return rows
}

// UnitKey is a rollup row's identity within one level and writer.
type UnitKey struct {
	Start int64 // start of the unit, Unix ns
	Key   Key
}

// FloorUnit returns the start of the unit of length u holding ns.
func FloorUnit(ns int64, u time.Duration) int64 { return FloorDiv(ns, int64(u)) * int64(u) }

// SelectColumns is the column list rollup rows are read with by
// scanRollup: the unit, the key, count, labels and every sketch.
var SelectColumns = "level, start_ns, " + strings.Join(KeyColumns, ", ") + ", count, labels, statuses, " + func() string {
	var cs []string
	for _, f := range store.StatFields {
		cs = append(cs, f.RollupColumn())
	}
	return strings.Join(cs, ", ")
}()

func CompareUnitKeys(a, b UnitKey) int {
	if c := CmpInt(a.Start, b.Start); c != 0 {
		return c
	}
	return CompareKeys(&a.Key, &b.Key)
}

func CompareKeys(a, b *Key) int {
	for _, p := range [][2]string{{a.API, b.API}, {a.Route, b.Route}, {a.Model, b.Model}, {a.Group, b.Group},
		{a.Channel, b.Channel}, {a.Region, b.Region}, {a.Provider, b.Provider}} {
		if c := strings.Compare(p[0], p[1]); c != 0 {
			return c
		}
	}
	if a.Stream != b.Stream {
		if a.Stream {
			return 1
		}
		return -1
	}
	return strings.Compare(a.Status, b.Status)
}
