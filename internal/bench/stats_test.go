package bench

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/ttfx/ttfx/internal/store"
)

func TestPercentileMatchesStore(t *testing.T) {
	// Without unbounded values the bench's percentile is the store's.
	vals := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10.5}
	for _, p := range []float64{0, 0.1, 0.5, 0.9, 0.95, 0.99, 1} {
		if got, want := Percentile(vals, p), store.Percentile(vals, p); got != want {
			t.Errorf("p%v = %v, store says %v", p, got, want)
		}
	}
	// R-7 by hand: n = 4, p50 → h = 1.5 → 2 + 0.5·(3 − 2).
	if got := Percentile([]float64{1, 2, 3, 4}, 0.5); got != 2.5 {
		t.Errorf("p50 of 1..4 = %v, want 2.5", got)
	}
}

func TestPercentileWithInf(t *testing.T) {
	inf := math.Inf(1)
	cases := []struct {
		vals []float64
		p    float64
		want float64
	}{
		// Half the requests failed: the median interpolates into +Inf.
		{[]float64{10, 20, inf, inf}, 0.5, inf},
		// h = 3·(1/3) = 1 lands exactly on a finite value: no 0·Inf NaN.
		{[]float64{10, 20, inf, inf}, 1.0 / 3, 20},
		{[]float64{10, 20, 30, inf}, 0.5, 25},
		{[]float64{10, 20, 30, inf}, 0.99, inf},
		{[]float64{inf}, 0.5, inf},
	}
	for _, c := range cases {
		got := Percentile(c.vals, c.p)
		if math.IsNaN(got) || got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.vals, c.p, got, c.want)
		}
	}
}

func TestDescribe(t *testing.T) {
	s := Describe([]float64{30, 10, 20, math.Inf(1)}, 2)
	if s.Count != 4 || s.Absent != 2 || s.Unbounded != 1 {
		t.Fatalf("counts %+v", s)
	}
	if v, _ := s.Min.Get(); v != 10 {
		t.Errorf("min %v", v)
	}
	if !s.Max.IsInf() || !s.Mean.IsInf() || !s.P99.IsInf() {
		t.Errorf("max %v mean %v p99 %v, want +Inf", s.Max, s.Mean, s.P99)
	}
	if v, _ := s.P50.Get(); v != 25 {
		t.Errorf("p50 %v, want 25", v)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Stat
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !back.Max.IsInf() || *back.P50 != 25 {
		t.Errorf("round trip %s → %+v", b, back)
	}

	empty := Describe(nil, 3)
	b, _ = json.Marshal(empty)
	if want := `{"count":0,"absent":3,"unbounded":0,"min":null,"max":null,"mean":null,"p50":null,"p90":null,"p95":null,"p99":null}`; string(b) != want {
		t.Errorf("empty stat %s, want %s", b, want)
	}
}

func TestValueJSON(t *testing.T) {
	b, _ := json.Marshal(Inf)
	if string(b) != `"+Inf"` {
		t.Errorf("Inf marshals as %s", b)
	}
	if _, err := json.Marshal(Value(math.NaN())); err == nil {
		t.Error("NaN marshalled")
	}
	var v Value
	if err := json.Unmarshal([]byte(`"fast"`), &v); err == nil {
		t.Error(`"fast" accepted as a value`)
	}
	if err := json.Unmarshal([]byte(`12.5`), &v); err != nil || v != 12.5 {
		t.Errorf("12.5 → %v, %v", v, err)
	}
}
