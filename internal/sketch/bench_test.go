package sketch

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// withBuckets returns a sketch of log-normal latencies (median 500 ms,
// σ = 1) with values added until it has exactly nb non-empty buckets: the
// shape of a real rollup of that size, sparse tails included.
func withBuckets(nb int) *Sketch {
	r := rand.New(rand.NewPCG(7, uint64(nb)))
	var s Sketch
	for have := 0; have < nb; {
		v := 500 * math.Exp(r.NormFloat64())
		i := index(v)
		st := &s.pos
		if i < st.base || i >= st.base+len(st.counts) || st.counts[i-st.base] == 0 {
			have++
		}
		s.Add(v)
	}
	return &s
}

func BenchmarkAdd(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	vs := make([]float64, 1024)
	for k := range vs {
		vs[k] = 500 * math.Exp(r.NormFloat64())
	}
	var s Sketch
	b.ReportAllocs()
	k := 0
	for b.Loop() {
		s.Add(vs[k&1023])
		k++
	}
}

func BenchmarkMerge(b *testing.B) {
	for _, nb := range []int{100, 300} {
		b.Run("buckets="+strconv.Itoa(nb), func(b *testing.B) {
			o := withBuckets(nb)
			var s Sketch
			s.Merge(o)
			b.ReportAllocs()
			for b.Loop() {
				s.Merge(o)
			}
		})
	}
}

// withValues returns a sketch of n log-normal latencies (median 500 ms,
// σ = 1): a dense rollup, of a busy hour or day, whose neighbouring
// bucket counts differ by more than a one-byte varint holds.
func withValues(n int) *Sketch {
	r := rand.New(rand.NewPCG(9, uint64(n)))
	var s Sketch
	for range n {
		s.Add(500 * math.Exp(r.NormFloat64()))
	}
	return &s
}

// BenchmarkMergeBinary is the read path of rollups: one encoded row merged
// into the query's sketch.
func BenchmarkMergeBinary(b *testing.B) {
	for _, c := range []struct {
		name string
		s    *Sketch
	}{
		{"buckets=100", withBuckets(100)},
		{"buckets=300", withBuckets(300)},
		{"values=1e6", withValues(1_000_000)},
	} {
		b.Run(c.name, func(b *testing.B) {
			enc, err := c.s.AppendBinary(nil)
			if err != nil {
				b.Fatal(err)
			}
			var s Sketch
			if err := s.MergeBinary(enc); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(len(enc)), "bytes")
			b.ReportAllocs()
			for b.Loop() {
				if err := s.MergeBinary(enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkUnmarshalBinary(b *testing.B) {
	enc, err := withBuckets(100).AppendBinary(nil)
	if err != nil {
		b.Fatal(err)
	}
	var s Sketch
	b.ReportAllocs()
	for b.Loop() {
		if err := s.UnmarshalBinary(enc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuantiles asks for p50, p90, p95 and p99 together, as the
// dashboards do.
func BenchmarkQuantiles(b *testing.B) {
	for _, nb := range []int{100, 300} {
		b.Run("buckets="+strconv.Itoa(nb), func(b *testing.B) {
			s := withBuckets(nb)
			ps := []float64{0.5, 0.9, 0.95, 0.99}
			out := make([]float64, len(ps))
			b.ReportAllocs()
			for b.Loop() {
				s.Quantiles(ps, out)
			}
		})
	}
}

func BenchmarkAppendBinary(b *testing.B) {
	for _, nb := range []int{100, 300} {
		b.Run("buckets="+strconv.Itoa(nb), func(b *testing.B) {
			s := withBuckets(nb)
			buf, _ := s.AppendBinary(nil)
			b.ReportMetric(float64(len(buf)), "bytes")
			b.ReportAllocs()
			for b.Loop() {
				buf, _ = s.AppendBinary(buf[:0])
			}
		})
	}
}
