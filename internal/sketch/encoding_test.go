package sketch

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

var (
	_ encoding.BinaryAppender    = (*Sketch)(nil)
	_ encoding.BinaryMarshaler   = (*Sketch)(nil)
	_ encoding.BinaryUnmarshaler = (*Sketch)(nil)
)

// enc assembles an encoding by hand: a byte as is, a uint64 as a uvarint,
// an int as a varint, a float64 as 8 little-endian bytes, a []byte as is.
func enc(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case byte:
			b = append(b, p)
		case uint64:
			b = binary.AppendUvarint(b, p)
		case int:
			b = binary.AppendVarint(b, int64(p))
		case float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p))
		case []byte:
			b = append(b, p...)
		default:
			panic("enc: bad part")
		}
	}
	return b
}

// mustEncode is AppendBinary for sketches that cannot fail to encode.
func mustEncode(t testing.TB, s *Sketch) []byte {
	t.Helper()
	b, err := s.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// logNormal returns a sketch of n log-normal latencies, median 500 ms and
// σ = 1, the shape of the rollups' LLM latencies.
func logNormal(r *rand.Rand, n int) *Sketch {
	var s Sketch
	for range n {
		s.Add(500 * math.Exp(r.NormFloat64()))
	}
	return &s
}

// samples are sketches of every shape the encoding has, built from a fixed
// seed so that the fuzz corpus is stable.
func samples() map[string]*Sketch {
	r := rand.New(rand.NewPCG(1, 2))
	of := func(vs ...float64) *Sketch {
		var s Sketch
		for _, v := range vs {
			s.Add(v)
		}
		return &s
	}
	big := logNormal(r, 100)
	for range 40 {
		big.Merge(big) // counts near 2^46: multi-byte count differences
	}
	return map[string]*Sketch{
		"empty":               of(),
		"one":                 of(250),
		"one zero":            of(math.Copysign(0, -1)),
		"one negative":        of(-42.5),
		"one tiny":            of(MinIndexable / 2),
		"one extreme":         of(-MaxIndexable),
		"zeros":               of(0, 0, 0),
		"zeros and negatives": of(-3, 0, 0, 2.5, -1e-12, 7e5),
		"extremes":            of(MinIndexable, MaxIndexable, -MinIndexable, -MaxIndexable, 1e300),
		"sparse":              of(1e-8, 1e-3, 1, 1e3, 1e6, 1e9, 1e11),
		"log-normal 10":       logNormal(r, 10),
		"log-normal 100":      logNormal(r, 100),
		"log-normal 1000":     logNormal(r, 1000),
		"big counts":          big,
	}
}

// TestEncodingGolden pins the format with sketches encoded by hand: values
// 1 and 2 fall in buckets 0 and 35 (⌈ln 2/ln γ⌉ = ⌈34.66⌉).
func TestEncodingGolden(t *testing.T) {
	var s Sketch
	s.Add(1)
	s.Add(2)
	s.Add(2)
	want := enc(byte(1), uint64(3), 1.0, 2.0, 5.0, uint64(0), // version, count, min, max, sum, zero
		uint64(2), 0, // positive store: 2 buckets from index 0
		uint64(1<<2),               // count 1 (difference +1, zigzag 2), no gap
		uint64(2<<1|1), uint64(33), // count 2 (difference +1), gap: index 0+2+33
		uint64(0)) // no negative buckets
	if got := mustEncode(t, &s); !bytes.Equal(got, want) {
		t.Errorf("encoding\n got % x\nwant % x", got, want)
	}
	var two Sketch
	two.Add(2)
	two.Add(1)
	if got, want := mustEncode(t, &two), enc(byte(3), 1.0, 2.0); !bytes.Equal(got, want) {
		t.Errorf("two values encode as % x, want % x", got, want)
	}
	if got := mustEncode(t, &Sketch{}); !bytes.Equal(got, []byte{1, 0}) {
		t.Errorf("empty sketch encodes as % x", got)
	}
}

// TestRoundTrip checks decode(encode(s)) = s, that encoding is
// deterministic, and that MergeBinary of an encoding is Merge.
func TestRoundTrip(t *testing.T) {
	r := newRand(t)
	for name, s := range samples() {
		t.Run(name, func(t *testing.T) {
			b := mustEncode(t, s)
			if m, err := s.MarshalBinary(); err != nil || !bytes.Equal(m, b) {
				t.Errorf("MarshalBinary = % x, %v; AppendBinary gave % x", m, err, b)
			}
			got := logNormal(r, 50) // dirty, to see that Unmarshal replaces
			if err := got.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			checkEqual(t, got, s, 0)
			if again := mustEncode(t, got); !bytes.Equal(again, b) {
				t.Errorf("re-encoding differs\n got % x\nwant % x", again, b)
			}
			viaMerge := logNormal(r, 50)
			viaBinary := &Sketch{}
			viaBinary.Merge(viaMerge)
			viaMerge.Merge(s)
			if err := viaBinary.MergeBinary(b); err != nil {
				t.Fatal(err)
			}
			checkEqual(t, viaBinary, viaMerge, 0)
		})
	}
}

// TestMergeBinary merges the encodings of random splits and compares with
// merging the sketches themselves, in the same order.
func TestMergeBinary(t *testing.T) {
	r := newRand(t)
	for _, d := range dists {
		t.Run(d.name, func(t *testing.T) {
			parts := make([]Sketch, 1+r.IntN(30))
			for range 1 + r.IntN(20_000) {
				parts[r.IntN(len(parts))].Add(d.gen(r))
			}
			var viaMerge, viaBinary Sketch
			for _, k := range r.Perm(len(parts)) {
				viaMerge.Merge(&parts[k])
				if err := viaBinary.MergeBinary(mustEncode(t, &parts[k])); err != nil {
					t.Fatal(err)
				}
			}
			checkEqual(t, &viaBinary, &viaMerge, 0)
		})
	}
}

// TestDecodeErrors feeds corrupt encodings to UnmarshalBinary and
// MergeBinary: each must fail and leave the sketch as it was.
func TestDecodeErrors(t *testing.T) {
	// header of a sketch of two values, min 1, max 2, sum 3, no zeros
	head := func(count uint64) []byte { return enc(byte(1), count, 1.0, 2.0, 3.0, uint64(0)) }
	valid := enc(head(2), uint64(2), 0, uint64(1<<2), uint64(1), uint64(33), uint64(0))
	tests := []struct {
		name string
		in   []byte
	}{
		{"nothing", nil},
		{"version 0", []byte{0, 0}},
		{"version 4", enc(byte(4), valid[1:])},
		{"one value, short", enc(byte(2), []byte{0, 0, 0, 0, 0, 0, 0})},
		{"one value, long", enc(byte(2), 1.0, byte(0))},
		{"one value, NaN", enc(byte(2), math.NaN())},
		{"one value, infinite", enc(byte(2), math.Inf(-1))},
		{"one value, −0", enc(byte(2), math.Copysign(0, -1))},
		{"two values, short", enc(byte(3), 1.0, []byte{0, 0, 0, 0, 0, 0, 0})},
		{"two values, long", enc(byte(3), 1.0, 2.0, byte(0))},
		{"two values, one", enc(byte(3), 1.0)},
		{"two values, NaN", enc(byte(3), 1.0, math.NaN())},
		{"two values, infinite", enc(byte(3), math.Inf(-1), 1.0)},
		{"two values, −0", enc(byte(3), math.Copysign(0, -1), 1.0)},
		{"two values, larger first", enc(byte(3), 2.0, 1.0)},
		{"version 1, two values in other buckets", enc(byte(1), uint64(2), 1.0, 2.0, 3.0, uint64(0), uint64(2), maxIndex-2, uint64(1<<2), uint64(1), uint64(0), uint64(0))},
		{"version 1, two values, another sum", enc(byte(1), uint64(2), 1.0, 2.0, 3.5, valid[len(head(2)):])},
		{"bytes after an empty sketch", []byte{1, 0, 0}},
		{"trailing byte", enc(valid, byte(0))},
		{"overlong varint", enc(byte(1), bytes.Repeat([]byte{0xff}, 10), byte(1))},
		{"count above 2^62−1", enc(byte(1), uint64(1<<62), 1.0, 1.0, 1.0, uint64(1<<62), uint64(0), uint64(0))},
		{"count too high", enc(head(3), valid[len(head(2)):])},
		{"count too low", enc(head(1), valid[len(head(2)):])},
		{"zero count above count", enc(byte(1), uint64(2), 1.0, 2.0, 3.0, uint64(1<<63), valid[len(head(2)):])},
		{"min above max", enc(byte(1), uint64(2), 2.0, 1.0, 3.0, valid[len(head(2))-1:])},
		{"NaN min", enc(byte(1), uint64(2), math.NaN(), 2.0, 3.0, valid[len(head(2))-1:])},
		{"infinite max", enc(byte(1), uint64(2), 1.0, math.Inf(1), 3.0, valid[len(head(2))-1:])},
		{"first index above range", enc(head(1), uint64(1), maxIndex+1, uint64(1<<2), uint64(0))},
		{"first index below range", enc(head(1), uint64(1), minIndex-1, uint64(1<<2), uint64(0))},
		{"more buckets than the range", enc(head(1), uint64(maxBuckets+1), 0, bytes.Repeat([]byte{0}, maxBuckets+2))},
		{"more buckets than bytes", enc(head(1), uint64(100), 0, uint64(1<<2), uint64(0))},
		{"gap before the first bucket", enc(head(1), uint64(1), 0, uint64(1<<2|1), uint64(0), uint64(0))},
		{"adjacent bucket past the range", enc(head(2), uint64(2), maxIndex, uint64(1<<2), uint64(0), uint64(0))},
		{"gap past the range", enc(head(2), uint64(2), maxIndex-2, uint64(1<<2), uint64(1), uint64(1), uint64(0))},
		{"huge gap", enc(head(2), uint64(2), 0, uint64(1<<2), uint64(1), uint64(1<<63), uint64(0))},
		{"empty bucket", enc(head(1), uint64(2), 0, uint64(1<<2), uint64(1<<1), uint64(0))},          // 1, then 1−1
		{"negative bucket count", enc(head(1), uint64(2), 0, uint64(1<<2), uint64(3<<1), uint64(0))}, // 1, then 1−2
		{"bucket count above 2^62−1", enc(head(maxCount), uint64(2), 0, uint64(maxCount)<<2, uint64(1<<2), uint64(0))},
		{"bucket counts overflow", enc(head(maxCount), uint64(2), 0, uint64(maxCount-1)<<2, uint64(0), uint64(0))},
		{"truncated float", valid[:10]},
		{"truncated store", valid[:len(valid)-3]},
	}
	for name, s := range samples() {
		b := mustEncode(t, s)
		for n := range len(b) {
			tests = append(tests, struct {
				name string
				in   []byte
			}{name + " cut at " + strconv.Itoa(n), b[:n]})
		}
	}
	base := samples()["zeros and negatives"]
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Sketch{}
			s.Merge(base)
			before := mustEncode(t, s)
			if err := s.UnmarshalBinary(tt.in); err == nil {
				t.Fatalf("UnmarshalBinary(% x) succeeded", tt.in)
			}
			if err := s.MergeBinary(tt.in); err == nil {
				t.Fatalf("MergeBinary(% x) succeeded", tt.in)
			}
			if after := mustEncode(t, s); !bytes.Equal(after, before) {
				t.Fatal("a failed decode changed the sketch")
			}
		})
	}
}

// TestCountLimit checks the 2^62−1 bound of the encoding on both sides.
func TestCountLimit(t *testing.T) {
	var s Sketch
	s.Add(1)
	s.pos.counts[s.pos.lo-s.pos.base] = maxCount
	s.pos.n, s.count = maxCount, maxCount
	b := mustEncode(t, &s)
	if err := s.MergeBinary(b); err == nil {
		t.Error("MergeBinary past the count limit succeeded")
	}
	// float64(count−1) rounds up to 2^62 here: the last rank must not be
	// passed.
	for _, p := range []float64{0, 0.5, 1} {
		if q, ok := s.Quantile(p); !ok || q != 1 {
			t.Errorf("Quantile(%v) = %v, %v", p, q, ok)
		}
	}
	s.Merge(&s)
	if _, err := s.AppendBinary(nil); err == nil {
		t.Error("AppendBinary past the count limit succeeded")
	}
}

// TestEncodedSize logs the sizes of typical rollups and checks that a
// sparse sketch pays per bucket, not per index it spans.
func TestEncodedSize(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 10, 100, 1000, 100_000} {
		s := logNormal(r, n)
		b := mustEncode(t, s)
		nb := len(s.pos.buckets())
		t.Logf("%7d log-normal values: %3d buckets, %4d bytes", n, nb, len(b))
		// header (at most 1+9+24+1), store headers (at most 2+3+1), and
		// at most 3 bytes a bucket for these counts
		if limit := 41 + 3*nb; len(b) > limit {
			t.Errorf("%d values: %d bytes, more than %d", n, len(b), limit)
		}
	}
	sparse := samples()["sparse"]
	b := mustEncode(t, sparse)
	span := sparse.pos.hi - sparse.pos.lo + 1
	t.Logf("sparse: %d values over %d buckets: %d bytes", sparse.count, span, len(b))
	if len(b) > 60 {
		t.Errorf("sparse sketch of %d values spanning %d buckets takes %d bytes", sparse.count, span, len(b))
	}
}

// TestMergeBinaryAllocs checks that merging encodings into a sketch whose
// stores already cover their indices allocates nothing.
func TestMergeBinaryAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	b := mustEncode(t, logNormal(r, 1000))
	var s Sketch
	if err := s.MergeBinary(b); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = s.MergeBinary(b) }); allocs != 0 {
		t.Errorf("MergeBinary: %v allocations a call", allocs)
	}
	s.Reset()
	if allocs := testing.AllocsPerRun(100, func() { s.Reset(); _ = s.MergeBinary(b) }); allocs != 0 {
		t.Errorf("Reset and MergeBinary: %v allocations a call", allocs)
	}
}

// TestTwoValues: a sketch of two values is its version-3 encoding, 17
// bytes, whichever was added first and whether it was added to or merged;
// it decodes to the same sketch (sum included), and a version-1 encoding
// of the same two values (as stored before version 3) decodes alike.
func TestTwoValues(t *testing.T) {
	for _, vs := range [][2]float64{{250, 3.5}, {0, 0}, {-42.5, 17}, {MinIndexable / 2, -MinIndexable / 4}, {1e300, 1e-300}, {0.1, 0.2}} {
		var s, one, merged Sketch
		s.Add(vs[0])
		s.Add(vs[1])
		one.Add(vs[1])
		merged.Add(vs[0])
		merged.Merge(&one)
		b := mustEncode(t, &s)
		if len(b) != 17 || b[0] != versionTwo {
			t.Errorf("%v: % x, want version %d and the two values", vs, b, versionTwo)
		}
		if m := mustEncode(t, &merged); !bytes.Equal(m, b) {
			t.Errorf("%v: merged % x, added % x", vs, m, b)
		}
		var got Sketch
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("%v: % x: %v", vs, b, err)
		}
		checkEqual(t, &got, &s, 0)
		if got.Sum() != vs[0]+vs[1] {
			t.Errorf("%v: sum %v, want %v", vs, got.Sum(), vs[0]+vs[1])
		}
		var again Sketch
		again.Add(7)
		if err := again.MergeBinary(b); err != nil {
			t.Fatal(err)
		}
		want := Sketch{}
		want.Add(7)
		want.Merge(&s)
		checkEqual(t, &again, &want, 0)
		// As stored before: version 1, with its stores.
		legacy, err := s.appendVersion1(nil)
		if err != nil {
			t.Fatal(err)
		}
		var old Sketch
		if err := old.UnmarshalBinary(legacy); err != nil {
			t.Fatalf("%v: legacy % x: %v", vs, legacy, err)
		}
		checkEqual(t, &old, &s, 0)
	}
}

// TestOneValue: a sketch of one value is its version-2 encoding, 9 bytes,
// and a version-1 encoding of one value (as stored before version 2)
// decodes and merges to the same sketch.
func TestOneValue(t *testing.T) {
	for _, v := range []float64{250, 0, -42.5, MinIndexable / 2, 1e300} {
		var s Sketch
		s.Add(v)
		b := mustEncode(t, &s)
		if len(b) != 9 || b[0] != versionOne {
			t.Errorf("%g: % x, want version %d and the value", v, b, versionOne)
		}
		var z uint64
		if math.Abs(v) < MinIndexable {
			z = 1
		}
		legacy := enc(byte(version), uint64(1), v, v, v, z)
		switch {
		case v >= MinIndexable:
			legacy = enc(legacy, uint64(1), index(v), uint64(1<<2), uint64(0))
		case v <= -MinIndexable:
			legacy = enc(legacy, uint64(0), uint64(1), index(-v), uint64(1<<2))
		default:
			legacy = enc(legacy, uint64(0), uint64(0))
		}
		var got, merged Sketch
		if err := got.UnmarshalBinary(legacy); err != nil {
			t.Fatalf("%g: legacy % x: %v", v, legacy, err)
		}
		checkEqual(t, &got, &s, 0)
		merged.Add(7)
		if err := merged.MergeBinary(b); err != nil {
			t.Fatal(err)
		}
		want := Sketch{}
		want.Add(7)
		want.Add(v)
		checkEqual(t, &merged, &want, 0)
	}
}
