package record

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestNewIDSortsByTime: ids of later milliseconds sort after earlier ones,
// ids of one millisecond differ by their random part, and every id has the
// form the gateway checks (req_ and 20 characters of its alphabet).
func TestNewIDSortsByTime(t *testing.T) {
	base := time.Date(2026, 12, 3, 19, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 1000 {
		ids = append(ids, NewID(base.Add(time.Duration(i)*time.Millisecond), uint64(1000-i)*0x9e3779b97f4a7c15))
	}
	if !slices.IsSorted(ids) {
		t.Errorf("ids of increasing times do not sort: %v …", ids[:3])
	}
	a, b := NewID(base, 1), NewID(base, 2)
	if a == b || a[:13] != b[:13] {
		t.Errorf("one millisecond, two random parts: %s and %s", a, b)
	}
	for _, at := range []time.Time{base, time.Unix(0, 0), time.Date(3084, 1, 1, 0, 0, 0, 0, time.UTC)} {
		id := NewID(at, ^uint64(0))
		if len(id) != 24 || !strings.HasPrefix(id, "req_") || strings.Trim(id[4:], idAlphabet) != "" {
			t.Errorf("NewID(%v) = %q, want req_ and 20 characters of %q", at, id, idAlphabet)
		}
	}
	if NewID(time.Date(3084, 1, 1, 0, 0, 0, 0, time.UTC), 0) < NewID(base, ^uint64(0)) {
		t.Error("an id of the year 3084 sorts before one of 2026")
	}
}
