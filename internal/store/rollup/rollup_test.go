package rollup

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

func TestRollupPlan(t *testing.T) {
	day, hour, minute := int64(24*time.Hour), int64(time.Hour), int64(time.Minute)
	d0 := testBase.UnixNano()
	type span struct {
		Level    int
		From, To int64
		Raw      bool
	}
	for _, c := range []struct {
		name     string
		from, to int64
		bucket   time.Duration
		dirty    [][2]int64
		want     []span
	}{
		{"whole days", d0, d0 + 2*day, 0, nil, []span{{Day, d0, d0 + 2*day, false}}},
		{"edges in hours and minutes", d0 + 23*hour - 5*minute, d0 + day + 2*hour + 3*minute, 0, nil, []span{
			{Minute, d0 + 23*hour - 5*minute, d0 + 23*hour, true}, {Hour, d0 + 23*hour, d0 + day + 2*hour, false},
			{Minute, d0 + day + 2*hour, d0 + day + 2*hour + 3*minute, true}}},
		{"a dirty day is read in six hours", d0, d0 + 2*day, 0, [][2]int64{{Day, d0 + day}}, []span{
			{Day, d0, d0 + day, false}, {SixHours, d0 + day, d0 + 2*day, false}}},
		{"a dirty six hours is read in three hours", d0, d0 + day, 0, [][2]int64{{Day, d0}, {SixHours, d0 + 6*hour}}, []span{
			{SixHours, d0, d0 + 6*hour, false}, {ThreeHours, d0 + 6*hour, d0 + 12*hour, false}, {SixHours, d0 + 12*hour, d0 + day, false}}},
		{"a dirty three hours is read in hours", d0, d0 + 6*hour, 0, [][2]int64{{SixHours, d0}, {ThreeHours, d0 + 3*hour}}, []span{
			{ThreeHours, d0, d0 + 3*hour, false}, {Hour, d0 + 3*hour, d0 + 6*hour, false}}},
		{"the last 24 hours: six hours, and the coarsest units that fit at its ends", d0 + 15*hour + 37*minute, d0 + day + 15*hour + 37*minute, 0, nil, []span{
			{Minute, d0 + 15*hour + 37*minute, d0 + 15*hour + 40*minute, true},
			{TenMinutes, d0 + 15*hour + 40*minute, d0 + 16*hour, false}, {Hour, d0 + 16*hour, d0 + 18*hour, false},
			{SixHours, d0 + 18*hour, d0 + day + 12*hour, false}, {ThreeHours, d0 + day + 12*hour, d0 + day + 15*hour, false},
			{HalfHour, d0 + day + 15*hour, d0 + day + 15*hour + 30*minute, false},
			{Minute, d0 + day + 15*hour + 30*minute, d0 + day + 15*hour + 37*minute, true}}},
		{"a dirty hour is read in half hours", d0, d0 + 3*hour, 0, [][2]int64{{ThreeHours, d0}, {Hour, d0 + hour}}, []span{
			{Hour, d0, d0 + hour, false}, {HalfHour, d0 + hour, d0 + 2*hour, false}, {Hour, d0 + 2*hour, d0 + 3*hour, false}}},
		{"a dirty half hour is read in ten minutes, a dirty ten minutes in minutes", d0, d0 + hour, 0,
			[][2]int64{{Hour, d0}, {HalfHour, d0}, {TenMinutes, d0 + 20*minute}}, []span{
				{TenMinutes, d0, d0 + 20*minute, false}, {Minute, d0 + 20*minute, d0 + 30*minute, true}, {HalfHour, d0 + 30*minute, d0 + hour, false}}},
		{"edges of ten minutes and half hours", d0 + 7*minute, d0 + hour + 25*minute, 0, nil, []span{
			{Minute, d0 + 7*minute, d0 + 10*minute, true}, {TenMinutes, d0 + 10*minute, d0 + 30*minute, false},
			{HalfHour, d0 + 30*minute, d0 + hour, false}, {TenMinutes, d0 + hour, d0 + hour + 20*minute, false},
			{Minute, d0 + hour + 20*minute, d0 + hour + 25*minute, true}}},
		{"edges of hours and ten minutes", d0 + 7*minute, d0 + 2*hour + 25*minute, 0, nil, []span{
			{Minute, d0 + 7*minute, d0 + 10*minute, true}, {TenMinutes, d0 + 10*minute, d0 + 30*minute, false},
			{HalfHour, d0 + 30*minute, d0 + hour, false},
			{Hour, d0 + hour, d0 + 2*hour, false}, {TenMinutes, d0 + 2*hour, d0 + 2*hour + 20*minute, false},
			{Minute, d0 + 2*hour + 20*minute, d0 + 2*hour + 25*minute, true}}},
		{"hourly buckets use no days", d0, d0 + day, time.Hour, nil, []span{{Hour, d0, d0 + day, false}}},
		{"12-hour buckets use six hours, no days", d0, d0 + day, 12 * time.Hour, nil, []span{{SixHours, d0, d0 + day, false}}},
		{"3-hour buckets use three hours", d0, d0 + day, 3 * time.Hour, nil, []span{{ThreeHours, d0, d0 + day, false}}},
		{"30-minute buckets use half hours", d0, d0 + hour, 30 * time.Minute, nil, []span{{HalfHour, d0, d0 + hour, false}}},
		{"10-minute buckets use no hours", d0, d0 + hour, 10 * time.Minute, nil, []span{{TenMinutes, d0, d0 + hour, false}}},
		{"5-minute buckets use minutes", d0, d0 + hour, 5 * time.Minute, nil, []span{{Minute, d0, d0 + hour, true}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := Plan{Dirty: map[[2]int64]bool{}}
			for level := range NumLevels {
				p.Allowed[level] = c.bucket == 0 || c.bucket%Unit[level] == 0
			}
			for _, d := range c.dirty {
				p.Dirty[d] = true
			}
			p.Cover(Day, c.from, c.to)
			var got []span
			for _, sp := range p.Spans {
				if sp.Fallback {
					t.Fatalf("span %+v reads a fallback projection; no unit left one out", sp)
				}
				got = append(got, span{sp.Level, sp.From, sp.To, sp.Raw})
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("spans %v, want %v", got, c.want)
			}
		})
	}
}

// TestProjectionFor: a summary reads the coarsest projection that keeps
// every dimension it filters or groups by.
func TestProjectionFor(t *testing.T) {
	yes := true
	for _, c := range []struct {
		q    store.StatsQuery
		cols []string
		want int
	}{
		{store.StatsQuery{}, nil, 8},
		{store.StatsQuery{Filter: store.Filter{Stream: &yes}}, nil, 8},
		{store.StatsQuery{Filter: store.Filter{Stream: &yes, Group: "g"}}, nil, 5},
		{store.StatsQuery{}, []string{"channel"}, 7},
		{store.StatsQuery{Filter: store.Filter{Group: "g"}}, []string{"channel"}, 4},
		{store.StatsQuery{Filter: store.Filter{Model: "m"}}, nil, 6},
		{store.StatsQuery{Filter: store.Filter{Model: "m", Group: "g"}}, nil, 3},
		{store.StatsQuery{Filter: store.Filter{Model: "m"}}, []string{"channel"}, 9},
		{store.StatsQuery{Filter: store.Filter{Model: "m", Group: "g"}}, []string{"channel"}, 2},
		{store.StatsQuery{}, []string{"api"}, 1},
		{store.StatsQuery{}, []string{"provider", "stream"}, 1},
		{store.StatsQuery{Filter: store.Filter{Status: "ok"}}, nil, 0},
	} {
		if got := ProjectionFor(&c.q, c.cols); got != c.want {
			t.Errorf("filter %+v, group columns %v: projection %d, want %d", c.q.Filter, c.cols, got, c.want)
		}
	}
	// Each projection keeps what it says and no more.
	k := Key{API: "a", Route: "r", Model: "m", Group: "g", Channel: "c", Region: "e", Provider: "p", Stream: true, Status: "ok"}
	for p, proj := range Projections {
		pk := k.Project(proj)
		for _, col := range KeyColumns {
			if kept := pk.Dim(col) == k.Dim(col); kept != proj.Has(col) {
				t.Errorf("projection %d: %s kept %v", p, col, kept)
			}
		}
	}
}

// TestStatusesRoundTrip: per-status counts survive the statuses column,
// whatever characters a status holds.
func TestStatusesRoundTrip(t *testing.T) {
	in := map[string]int64{"ok": 1 << 40, "upstream_error": 3, "a,b=c%2C": 2, "": 1, "%": 7}
	got := map[string]int64{}
	AddStatuses(got, EncodeStatuses(in))
	if !maps.Equal(got, in) {
		t.Errorf("got %v, want %v (encoded %q)", got, in, EncodeStatuses(in))
	}
	AddStatuses(got, "ok=1,broken,=x,ok=2")
	if got["ok"] != 1<<40+3 {
		t.Errorf("malformed parts not skipped: ok=%d", got["ok"])
	}
}

// TestRollupPlanProjected: a summary of a projection other than 0 reads
// coarser units from that projection's rows, and minutes (which have no
// compacted rows), dirty or not, from their raw ones.
func TestRollupPlanProjected(t *testing.T) {
	hour, minute := int64(time.Hour), int64(time.Minute)
	d0 := testBase.UnixNano()
	p := Plan{Dirty: map[[2]int64]bool{}}
	for level := range NumLevels {
		p.Allowed[level] = true
	}
	for _, d := range [][2]int64{{Minute, d0 + 8*minute}, {HalfHour, d0 + 30*minute}, {TenMinutes, d0 + 50*minute}} {
		p.Dirty[d] = true
	}
	p.Cover(Day, d0+7*minute, d0+hour+13*minute)
	sp := func(level int, from, to int64, raw bool) Span {
		return Span{Level: level, From: from, To: to, Raw: raw}
	}
	want := []Span{
		sp(Minute, d0+7*minute, d0+10*minute, true), sp(TenMinutes, d0+10*minute, d0+50*minute, false),
		sp(Minute, d0+50*minute, d0+hour, true), sp(TenMinutes, d0+hour, d0+hour+10*minute, false),
		sp(Minute, d0+hour+10*minute, d0+hour+13*minute, true),
	}
	if !slices.Equal(p.Spans, want) {
		t.Errorf("spans %v, want %v", p.Spans, want)
	}
	groups := p.ByLevel(3)
	var levels []int64
	for _, g := range groups {
		levels = append(levels, g.Level)
	}
	if !slices.Equal(levels, []int64{0, 31}) {
		t.Errorf("stored levels read %v, want raw minutes and ten minutes of projection 3", levels)
	}
}

// TestSparse: a compacted unit leaves out a projection whose rows are more
// than half of those its fallback holds, and a summary of that projection
// reads the fallback's rows for that unit only.
func TestSparse(t *testing.T) {
	// Rows per projection of a unit of a few records: projections 1 and 2
	// hardly merge, the ones without the model and channel do.
	rows := []int{10, 9, 8, 6, 6, 3, 6, 5, 2, 8}
	missing := Sparse(rows, 40, 1000)
	for p, want := range []bool{false, true, true, true, true, false, true, false, true, true} {
		if got := missing&(1<<p) != 0; got != want {
			t.Errorf("projection %d (%d rows, fallback %d): left out %v, want %v", p, rows[p], Fallback(p, missing), got, want)
		}
	}
	// Each left-out projection's fallback is stored, keeps its dimensions,
	// and holds less than twice its rows.
	for p := range Projections {
		fb := Fallback(p, missing)
		if missing&(1<<fb) != 0 || Projections[fb]&Projections[p] != Projections[p] {
			t.Errorf("projection %d: fallback %d not stored or not a superset", p, fb)
		}
		if fb != p && rows[fb] >= 2*rows[p] {
			t.Errorf("projection %d: fallback %d holds %d rows, %d wanted", p, fb, rows[fb], rows[p])
		}
	}
	// Where every projection merges its finer one's rows, every one is
	// stored.
	dense := []int{1000, 400, 190, 60, 60, 10, 20, 20, 2, 90}
	if m := Sparse(dense, 3000, 100000); m != 0 {
		t.Errorf("dense unit: left out %b", m)
	}
	// The same rows of 1,200 records: projections 1 and 2 would average
	// fewer than MinRecordsPerRow records a row and are left out, though
	// each halves its fallback's rows; projection 0 is kept, and the
	// projections that read it where 1 and 2 are left out.
	if m := Sparse(dense, 3000, 1200); m != 1<<1|1<<2 {
		t.Errorf("unit of 1,200 records: left out %b, want projections 1 and 2", m)
	}
	if Sparse(make([]int, len(Projections)), 0, 0) != 0 {
		t.Error("an empty unit leaves projections out")
	}

	// Where the unit hardly merges its finer rows (15), projection 0 is
	// left out too, and so is each projection that would read those.
	m0 := Sparse(rows, 15, 1000)
	for p, want := range []bool{true, true, true, false, false, false, true, true, true, true} {
		if got := m0&(1<<p) != 0; got != want {
			t.Errorf("finer rows 15: projection %d left out %v, want %v", p, got, want)
		}
	}

	// A summary of projection 8 over three hours, by the hour: the
	// middle hour left projection 8 out and is read in its fallback, 5.
	hour := int64(time.Hour)
	d0 := testBase.UnixNano()
	p := Plan{Dirty: map[[2]int64]bool{}, Missing: map[[2]int64]uint16{{Hour, d0 + hour}: missing | 1<<8}, Proj: 8}
	for level := range NumLevels {
		p.Allowed[level] = Unit[level] <= time.Hour
	}
	p.Cover(Day, d0, d0+3*hour)
	var got [][3]int64
	for _, g := range p.ByLevel(8) {
		for _, s := range g.Spans {
			got = append(got, [3]int64{g.Level, s.From, s.To})
		}
	}
	want := [][3]int64{{StoredLevel(Hour, 8), d0, d0 + hour}, {StoredLevel(Hour, 8), d0 + 2*hour, d0 + 3*hour},
		{StoredLevel(Hour, 5), d0 + hour, d0 + 2*hour}}
	if !slices.Equal(got, want) {
		t.Errorf("hour left out of projection 8: read %v, want %v", got, want)
	}
	// The middle hour left out every projection: its half hours are read.
	p = Plan{Dirty: map[[2]int64]bool{}, Missing: map[[2]int64]uint16{{Hour, d0 + hour}: 1<<len(Projections) - 1}, Proj: 8}
	for level := range NumLevels {
		p.Allowed[level] = Unit[level] <= time.Hour
	}
	p.Cover(Day, d0, d0+3*hour)
	got = nil
	for _, g := range p.ByLevel(8) {
		for _, s := range g.Spans {
			got = append(got, [3]int64{g.Level, s.From, s.To})
		}
	}
	want = [][3]int64{{StoredLevel(Hour, 8), d0, d0 + hour}, {StoredLevel(Hour, 8), d0 + 2*hour, d0 + 3*hour}, {StoredLevel(HalfHour, 8), d0 + hour, d0 + 2*hour}}
	if !slices.Equal(got, want) {
		t.Errorf("hour left out whole: read %v, want %v", got, want)
	}
}

var testBase = time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)

// TestProjectSome: ProjectedRows counts each projection's rows without
// merging, and ProjectSome makes the projections it does not skip as
// ProjectCells does.
func TestProjectSome(t *testing.T) {
	full := map[Key]*Cell{}
	for i, k := range []Key{
		{API: "a", Model: "m1", Group: "g1", Channel: "c1", Stream: true, Status: "ok"},
		{API: "a", Model: "m1", Group: "g1", Channel: "c1", Stream: true, Status: "upstream_error"},
		{API: "b", Model: "m1", Group: "g2", Channel: "c2", Stream: true, Status: "ok"},
		{API: "b", Model: "m2", Group: "g2", Channel: "c2", Status: "ok"},
		{API: "a", Model: "m2", Group: "g1", Channel: "c1", Status: "ok"},
	} {
		c := NewCell()
		c.Count = int64(i + 1)
		c.Statuses[k.Status] = c.Count
		full[k] = c
	}
	all := ProjectCells(full)
	rows := ProjectedRows(full)
	skip := uint16(1<<2 | 1<<5 | 1<<8)
	some := ProjectSome(full, skip)
	for p := range Projections {
		if rows[p] != len(all[p]) {
			t.Errorf("projection %d: ProjectedRows %d, ProjectCells made %d", p, rows[p], len(all[p]))
		}
		if skip&(1<<p) != 0 {
			if some[p] != nil {
				t.Errorf("projection %d skipped but made", p)
			}
			continue
		}
		if len(some[p]) != len(all[p]) {
			t.Fatalf("projection %d: %d cells, want %d", p, len(some[p]), len(all[p]))
		}
		for k, c := range all[p] {
			if o := some[p][k]; o == nil || o.Count != c.Count || !maps.Equal(o.Statuses, c.Statuses) {
				t.Errorf("projection %d key %+v: %+v, want %+v", p, k, o, c)
			}
		}
	}
}
