package relay

import (
	"bytes"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// BenchmarkParseRequest reads a streaming chat request as the gateway does:
// the fields routing needs, and the upstream body with the usage option
// added. The prompt sizes are a short chat turn and a long context.
//
//	go test ./internal/relay -run '^$' -bench ParseRequest -benchmem
func BenchmarkParseRequest(b *testing.B) {
	ep := endpointOf(apiChat) // POST /v1/chat/completions
	for _, size := range []int{200, 100 << 10} {
		msg := strings.Repeat("lorem ipsum \\\"dolor\\\" sit amet ", size/30+1)[:size]
		body := []byte(`{"model":"gpt-4.1","stream":true,"temperature":0.2,"user":"u-123",` +
			`"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + msg + `"}],` +
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}}}}}]}`)
		b.Run("prompt="+strconv.Itoa(size), func(b *testing.B) {
			r := httptest.NewRequest("POST", "/v1/chat/completions", bytes.NewReader(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				cr, herr := parseRequest(ep, r, body)
				if herr != nil || cr.model != "gpt-4.1" || !cr.stream || cr.usage == nil {
					b.Fatalf("%v %+v", herr, cr)
				}
			}
		})
	}
}
