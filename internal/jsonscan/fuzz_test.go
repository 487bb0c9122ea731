package jsonscan

import (
	"bytes"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// addFixtureData seeds a fuzz corpus with the data lines of the recorded
// provider streams.
func addFixtureData(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/fixtures/*.sse")
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n") {
			if data, ok := strings.CutPrefix(line, "data: "); ok && len(data) < 2048 {
				f.Add([]byte(data))
			}
		}
	}
	for _, c := range validityCases {
		f.Add([]byte(c))
	}
}

// FuzzValid checks that the scanner and encoding/json agree on what is
// valid JSON, in both directions.
func FuzzValid(f *testing.F) {
	addFixtureData(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := Valid(in), json.Valid(in); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid = %v", in, got, want)
		}
	})
}

// FuzzWalk walks arbitrary input with the typed calls (as the classifiers
// do), reading every string and number it meets, and checks that a walk
// that ends cleanly was over valid JSON and decoded every string as
// encoding/json does.
func FuzzWalk(f *testing.F) {
	addFixtureData(f)
	f.Add([]byte(`{"usage":{"a":3.0,"b":1e1,"c":1.5e2,"d":2.5,"e":-0,"f":300e-2,"g":9007199254740993}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		d := New(in)
		var strs [][]byte
		walk(&d, &strs, 0)
		if !d.End() {
			return
		}
		checkIntegers(t, in)
		if !json.Valid(in) {
			t.Fatalf("walk accepted invalid JSON %q", in)
		}
		for _, raw := range strs {
			var want string
			if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &want); err != nil {
				t.Fatalf("string %q accepted by the scanner, rejected by encoding/json: %v", raw, err)
			}
			if got := string(AppendUnescaped(nil, raw)); got != want {
				t.Fatalf("AppendUnescaped(%q) = %q, encoding/json %q", raw, got, want)
			}
			// strings.TrimSpace trims exactly unicode.IsSpace.
			if got := HasNonSpace(raw); got != (strings.TrimSpace(want) != "") {
				t.Fatalf("HasNonSpace(%q) = %v, decoded %q", raw, got, want)
			}
		}
	})
}

func walk(d *Decoder, strs *[][]byte, depth int) {
	if depth > 64 {
		d.Skip()
		return
	}
	switch d.Peek() {
	case Object:
		d.Object()
		for {
			if _, ok := d.Key(); !ok {
				return
			}
			walk(d, strs, depth+1)
		}
	case Array:
		d.Array()
		for d.Elem() {
			walk(d, strs, depth+1)
		}
	case String:
		if s, ok := d.Str(); ok {
			*strs = append(*strs, s)
		}
	case Number:
		d.Int()
	case Bool:
		d.Bool()
	default:
		d.Skip()
	}
}

// checkIntegers reads every number of valid JSON with Integer and checks
// it against exact rational arithmetic.
func checkIntegers(t *testing.T, in []byte) {
	var nums [][]byte
	var collect func(d *Decoder, depth int)
	collect = func(d *Decoder, depth int) {
		switch d.Peek() {
		case Object:
			d.Object()
			for {
				if _, ok := d.Key(); !ok {
					return
				}
				collect(d, depth+1)
			}
		case Array:
			d.Array()
			for d.Elem() {
				collect(d, depth+1)
			}
		case Number:
			raw, _ := d.SkipRaw()
			nums = append(nums, raw)
		default:
			d.Skip()
		}
	}
	d := New(in)
	collect(&d, 0)
	for _, raw := range nums {
		n := New(raw)
		got, ok := n.Integer()
		if !n.End() {
			t.Fatalf("Integer(%s) did not consume the number", raw)
		}
		// big.Rat parses exponents exactly but slowly; keep them small.
		if e := bytes.IndexAny(raw, "eE"); e >= 0 && len(raw)-e > 4 {
			continue
		}
		r, valid := new(big.Rat).SetString(string(raw))
		if !valid {
			t.Fatalf("big.Rat rejects %s", raw)
		}
		want := r.IsInt() && r.Num().IsInt64() && r.Num().Int64() <= MaxInteger && r.Num().Int64() >= -MaxInteger
		if ok != want || (ok && got != r.Num().Int64()) {
			t.Fatalf("Integer(%s) = %d, %v; exact value %s", raw, got, ok, r.RatString())
		}
	}
}
