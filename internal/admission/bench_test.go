package admission

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation since start
// (cpu-ns/op): on a machine shared with other work, ns/op counts the time
// the benchmark waited for a core too, cpu-ns/op what it used of one.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

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
	cpu := cpuTime(b)
	for b.Loop() {
		t, d := l.Admit(ctx, q)
		if d != nil {
			b.Fatal(d)
		}
		t.Done(700)
	}
	reportCPU(b, cpu)
}

// BenchmarkAdmitUnlimited is a request no rule applies to.
func BenchmarkAdmitUnlimited(b *testing.B) {
	l, _ := New([]Rule{{Scope: ScopeKey, Match: "bob", RequestsPerMinute: 10, Queue: time.Second}}, Options{})
	ctx := context.Background()
	q := Request{Key: "alice", Group: "team", Model: "gpt-4o"}
	b.ReportAllocs()
	cpu := cpuTime(b)
	for b.Loop() {
		t, _ := l.Admit(ctx, q)
		t.Done(-1)
	}
	reportCPU(b, cpu)
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
