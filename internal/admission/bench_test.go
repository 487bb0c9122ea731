package admission

import (
	"context"
	"testing"
	"time"
)

// BenchmarkAdmitMemory is one request's admission in memory against three
// limits (its key's requests per minute, its group's tokens per minute
// and a model pattern's concurrency), and its ticket's end: the work
// added to a request that limits apply to. The limits are far from
// reached, as on a gateway that is not refusing anything.
func BenchmarkAdmitMemory(b *testing.B) {
	l, err := New([]Rule{
		{Scope: ScopeKey, Match: "*", RequestsPerMinute: 1 << 30},
		{Scope: ScopeGroup, Match: "team", TokensPerMinute: 1 << 30},
		{Scope: ScopeModel, Match: "gpt-*", Concurrent: 1 << 20},
	}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	q := Request{Key: "alice", Group: "team", Model: "gpt-4o", Tokens: 500}
	b.ReportAllocs()
	for b.Loop() {
		t, d := l.Admit(ctx, q)
		if d != nil {
			b.Fatal(d)
		}
		t.Done(700)
	}
}

// BenchmarkAdmitUnlimited is a request no rule applies to.
func BenchmarkAdmitUnlimited(b *testing.B) {
	l, _ := New([]Rule{{Scope: ScopeKey, Match: "bob", RequestsPerMinute: 10, Queue: time.Second}}, Options{})
	ctx := context.Background()
	q := Request{Key: "alice", Group: "team", Model: "gpt-4o"}
	b.ReportAllocs()
	for b.Loop() {
		t, _ := l.Admit(ctx, q)
		t.Done(-1)
	}
}

// BenchmarkPromptTokens is the estimate of a chat prompt of about 1,000
// tokens, paid only where a token limit applies.
func BenchmarkPromptTokens(b *testing.B) {
	text := ""
	for len(text) < 4500 {
		text += "The gateway counts the prompt's tokens before it admits the request. "
	}
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + text + `"}]}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		PromptTokens(body)
	}
}
