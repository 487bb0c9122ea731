package sketch

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// FuzzDecode feeds arbitrary bytes, as a damaged database row would, to the
// decoder. Any input must either fail, leaving the sketch as it was, or
// give a valid sketch that re-encodes canonically and decodes back equal,
// and that MergeBinary merges exactly as Merge does.
func FuzzDecode(f *testing.F) {
	for _, s := range samples() {
		f.Add(mustEncode(f, s))
	}
	f.Add([]byte{1, 0})
	f.Add(enc(byte(1), uint64(2), 1.0, 2.0, 3.0, uint64(0), uint64(2), maxIndex-2, uint64(1<<2), uint64(1), uint64(0), uint64(0)))
	base := samples()["zeros and negatives"]
	before := mustEncode(f, base)
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Sketch
		s.Add(42) // not empty, so a failed decode has something to keep
		if err := s.UnmarshalBinary(b); err != nil {
			if s.count != 1 || s.min != 42 {
				t.Fatal("a failed UnmarshalBinary changed the sketch")
			}
			into := &Sketch{}
			into.Merge(base)
			if into.MergeBinary(b) == nil {
				t.Fatal("MergeBinary accepts what UnmarshalBinary rejects")
			}
			if after := mustEncode(t, into); !bytes.Equal(after, before) {
				t.Fatal("a failed MergeBinary changed the sketch")
			}
			return
		}
		checkValid(t, &s)
		if n := len(s.pos.counts) + len(s.neg.counts); n > 2*maxBuckets {
			t.Fatalf("%d buckets allocated", n)
		}
		e := mustEncode(t, &s)
		var again Sketch
		if err := again.UnmarshalBinary(e); err != nil {
			t.Fatalf("re-encoding does not decode: %v", err)
		}
		checkEqual(t, &again, &s, 0)
		if e2 := mustEncode(t, &again); !bytes.Equal(e2, e) {
			t.Fatal("encoding is not deterministic")
		}
		viaMerge, viaBinary := &Sketch{}, &Sketch{}
		viaMerge.Merge(base)
		viaBinary.Merge(base)
		viaMerge.Merge(&s)
		if err := viaBinary.MergeBinary(b); err != nil {
			t.Fatalf("MergeBinary rejects what UnmarshalBinary accepts: %v", err)
		}
		checkEqual(t, viaBinary, viaMerge, 0)
		out := make([]float64, 4)
		s.Quantiles([]float64{0, 0.5, 0.99, 1}, out)
		for _, q := range out {
			if !(q >= s.min && q <= s.max) {
				t.Fatalf("quantile %v outside [%v, %v]", q, s.min, s.max)
			}
		}
	})
}

// FuzzSketch adds arbitrary float64s (8 little-endian bytes each) to a
// sketch and to two halves, and checks the merge, the round trip and the
// accuracy bound against exact R-7 wherever the bound applies.
func FuzzSketch(f *testing.F) {
	for _, vs := range [][]float64{
		{0},
		{1, 2, 3},
		{-1, 0, 1, 1e-12, MaxIndexable, 2 * MaxIndexable},
		{0.1, 0.1, 0.1, 1e6, -3, math.NaN(), math.Inf(-1)},
		{5e-324, math.MaxFloat64, -math.MaxFloat64},
	} {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		f.Add(b, uint8(len(vs)/2))
	}
	f.Fuzz(func(t *testing.T, b []byte, cut uint8) {
		var whole, half [2]Sketch
		var xs []float64
		for k := 0; k+8 <= len(b); k += 8 {
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[k:]))
			added := whole[0].Add(v)
			half[min(k/8/max(int(cut), 1), 1)].Add(v)
			if added != !(math.IsNaN(v) || math.IsInf(v, 0)) {
				t.Fatalf("Add(%v) = %v", v, added)
			}
			if added {
				xs = append(xs, v)
			}
		}
		s := &whole[0]
		checkValid(t, s)
		merged := &whole[1]
		merged.Merge(&half[1])
		merged.Merge(&half[0])
		// The halves sum in another order, and with cancellation between
		// extreme values no tolerance would hold: the sum is not compared.
		checkEqual(t, merged, s, math.Inf(1))
		var back Sketch
		if err := back.UnmarshalBinary(mustEncode(t, s)); err != nil {
			t.Fatal(err)
		}
		checkEqual(t, &back, s, 0)
		if len(xs) == 0 {
			return
		}
		slices.Sort(xs)
		for _, p := range []float64{0, 0.1, 0.5, 0.9, 0.99, 1} {
			got, _ := s.Quantile(p)
			if !(got >= xs[0] && got <= xs[len(xs)-1]) {
				t.Fatalf("p=%v: %v outside [%v, %v]", p, got, xs[0], xs[len(xs)-1])
			}
			h := float64(len(xs)-1) * p
			l := int(h)
			x0, x1 := xs[l], xs[min(l+1, len(xs)-1)]
			if !inBound(x0) || !inBound(x1) {
				continue
			}
			want, mag := r7(xs, p)
			if err := math.Abs(got - want); err > (RelativeAccuracy+1e-12)*mag {
				t.Fatalf("p=%v: got %v, exact %v: error %.3g > %.3g", p, got, want, err, (RelativeAccuracy+1e-12)*mag)
			}
		}
	})
}

// inBound reports whether the accuracy bound covers v: exactly 0, or a
// magnitude in [MinIndexable, MaxIndexable].
func inBound(v float64) bool {
	m := math.Abs(v)
	return v == 0 || m >= MinIndexable && m <= MaxIndexable
}
