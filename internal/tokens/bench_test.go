package tokens

import (
	"runtime"
	"testing"

	"github.com/tiktoken-go/tokenizer"
)

// BenchmarkCount counts the tokens of the project's docs and sources, here
// and with tiktoken-go, which this package replaced in the binary. An op is
// the whole corpus; ns/token is per token counted.
func BenchmarkCount(b *testing.B) {
	texts := corpus(b)
	total := 0
	for _, s := range texts {
		total += Count(s)
	}
	lib, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		count func(string) int
	}{
		{"ttfx", Count},
		{"tiktoken-go", func(s string) int { n, _ := lib.Count(s); return n }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				n := 0
				for _, s := range texts {
					n += bc.count(s)
				}
				if n != total {
					b.Fatalf("%d tokens, want %d", n, total)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/token")
		})
	}
}

// BenchmarkVocabulary measures building the vocabulary's table (done once
// per process, by Load or the first count) and the heap it keeps.
// tiktoken-go's map, built once per process and so not measurable here
// beside it, took about 56 ms and 6.8 MB of heap with pointers in every
// entry, measured in a process of its own.
func BenchmarkVocabulary(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var v *vocab
	for b.Loop() {
		v = newVocab(o200kBase)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(v)
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)), "heap_B")
}
