package jsonscan

import (
	"encoding/json"
	"testing"
)

var benchChunk = []byte(`{"id":"chatcmpl-E6yvkr7hjcsBF18tAhF6z9yBFDts4","object":"chat.completion.chunk","created":1785332892,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_627de6ad19","choices":[{"index":0,"delta":{"content":"POST"},"logprobs":null,"finish_reason":null}],"obfuscation":"KTKPTyPbX"}`)

// BenchmarkValid walks and validates a 280-byte chat chunk.
func BenchmarkValid(b *testing.B) {
	b.SetBytes(int64(len(benchChunk)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(benchChunk) {
			b.Fatal("invalid")
		}
	}
}

// BenchmarkEncodingJSONValid is the standard library's validator on the
// same chunk, for comparison.
func BenchmarkEncodingJSONValid(b *testing.B) {
	b.SetBytes(int64(len(benchChunk)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(benchChunk) {
			b.Fatal("invalid")
		}
	}
}
