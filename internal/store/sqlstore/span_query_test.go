package sqlstore

import (
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/store/rollup"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestSpanQuerySearchesRanges: on SQLite, where the rollups of a new file
// are a WITHOUT ROWID table, the query of a level's spans searches each
// span's range of the primary key (and each row's series by its id, a
// filter by model notwithstanding) rather than every row of the level
// (which ORed ranges made it do: a day's summary ending mid-minute took
// 40 ms instead of 1 at 100 000 records a week).
func TestSpanQuerySearchesRanges(t *testing.T) {
	s, _ := storetest.OpenSQLite(t)
	spans := []rollup.Span{{Level: rollup.Minute, From: 60e9, To: 120e9, Raw: true}, {Level: rollup.Minute, From: 600e9, To: 660e9, Raw: true}}
	query, args := spanQuery("start_ns, count", rollupsFrom(sqliteDialect), 0, spans, func(b *builder) { b.cond("model = " + b.arg("m")) }, true)
	rows, err := storetest.ReadDB(s).QueryContext(storetest.Ctx(t), "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	searches := 0
	for _, d := range plan {
		if strings.Contains(d, "rollup_series") && !strings.Contains(d, "PRIMARY KEY") {
			t.Errorf("a step reads the series, not the one of a row's id: %q", d)
		}
		if strings.Contains(d, "rollups") {
			if !strings.Contains(d, "start_ns>? AND start_ns<?") {
				t.Errorf("a step reads the level, not a span's range: %q", d)
			}
			searches++
		}
	}
	if searches != len(spans) {
		t.Errorf("%d range searches for %d spans; plan %q", searches, len(spans), plan)
	}
	// Past MaxSpansInSQL spans, one search of their envelope.
	many := make([]rollup.Span, rollup.MaxSpansInSQL+1)
	for i := range many {
		many[i] = rollup.Span{Level: rollup.Minute, From: int64(2*i) * 60e9, To: int64(2*i+1) * 60e9, Raw: true}
	}
	if query, _ := spanQuery("start_ns", "rollups", 0, many, nil, true); strings.Contains(query, "UNION") || strings.Count(query, "start_ns >=") != 1 {
		t.Errorf("envelope query %q", query)
	}
	// PostgreSQL's form: the ranges ORed in one query.
	if query, args := spanQuery("start_ns", "rollups", 0, spans, nil, false); strings.Contains(query, "UNION") ||
		strings.Count(query, "start_ns >=") != len(spans) || len(args) != 1+2*len(spans) {
		t.Errorf("ORed query %q %v", query, args)
	}
}
