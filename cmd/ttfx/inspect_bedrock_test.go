package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
	"github.com/ttfx/ttfx/internal/sim"
)

// An event-stream file is read frame by frame: a Converse stream's frames
// are its events; an InvokeModelWithResponseStream one's events are the
// Anthropic events inside its chunks.
func TestInspectEventStream(t *testing.T) {
	var conv []byte
	conv = eventstream.AppendEvent(conv, "messageStart", []byte(`{"role":"assistant"}`))
	conv = eventstream.AppendEvent(conv, "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"hmm"}}}`))
	conv = eventstream.AppendEvent(conv, "contentBlockDelta", []byte(`{"contentBlockIndex":1,"delta":{"text":"Hi"}}`))
	conv = eventstream.AppendEvent(conv, "messageStop", []byte(`{"stopReason":"end_turn"}`))
	conv = eventstream.AppendEvent(conv, "metadata", []byte(`{"metrics":{"latencyMs":300},"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7}}`))
	events, sum := runInspectOutput(t, []string{"-"}, conv)
	s := sum.Summary
	if len(events) != 5 || s.API != "bedrock.converse" || *s.FirstEvent != 0 || *s.FirstResponse != 1 || *s.FirstText != 2 || s.Terminal != "done" || *s.FinishReason != "end_turn" {
		t.Errorf("converse: %d events, summary %+v", len(events), s)
	}

	var inv []byte
	for _, e := range []string{
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
		`{"type":"message_stop"}`,
	} {
		inv = eventstream.Append(inv, []eventstream.Header{{Name: ":event-type", Value: "chunk"}, {Name: ":message-type", Value: "event"}},
			[]byte(`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(e))+`"}`))
	}
	events, sum = runInspectOutput(t, []string{"-"}, inv)
	s = sum.Summary
	if len(events) != 4 || s.API != "anthropic" || *s.FirstText != 1 || s.Terminal != "done" {
		t.Errorf("invoke: %d events, summary %+v", len(events), s)
	}
}

// TestInspectCapturedEventStreams: `ttfx inspect FILE` on event-stream
// files the simulator sent over loopback, saved as a client would save
// them: a Converse stream of each shape (text, reasoning, tool input, an
// in-stream exception, a stream that ends without its terminal events,
// one cut inside a frame) and an InvokeModelWithResponseStream one. The
// API is sniffed from the bytes; each frame is one event line.
func TestInspectCapturedEventStreams(t *testing.T) {
	const key = "bedrock-key-inspect"
	up := httptest.NewServer(sim.New(sim.Options{Profiles: sim.Builtin(), APIKey: key}))
	t.Cleanup(up.Close)
	dir := t.TempDir()
	capture := func(path, body string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", up.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/vnd.amazon.eventstream" {
			t.Fatalf("%s: %d %s %v", path, resp.StatusCode, resp.Header.Get("Content-Type"), err)
		}
		f := filepath.Join(dir, strings.NewReplacer("/", "_").Replace(path)+".bin")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return f
	}
	converse := `{"messages":[{"role":"user","content":[{"text":"Tell me."}]}]}`
	frames := func(file string) int {
		b, _ := os.ReadFile(file)
		r := eventstream.NewReader(bytes.NewReader(b), 0)
		n := 0
		for {
			if _, err := r.Next(); err != nil {
				return n
			}
			n++
		}
	}
	count := func(s map[string]int, k string) int { return s[k] }

	fast := capture("/model/fast/converse-stream", converse)
	events, sum := runInspectOutput(t, []string{fast}, nil)
	s := sum.Summary
	if s.API != "bedrock.converse" || len(events) != frames(fast) || s.Terminal != "done" || s.FinishReason == nil || *s.FinishReason != "end_turn" ||
		*s.FirstEvent != 0 || s.FirstText == nil || *s.FirstText != *s.FirstResponse || s.Tokens.Visible == nil || *s.Tokens.Visible != 60 || s.Tokens.Source != "usage" {
		t.Errorf("fast: %d events of %d frames, summary %+v", len(events), frames(fast), s)
	}
	if events[0].Type != "messageStart" || events[0].Kind != "metadata" || events[len(events)-1].Type != "metadata" {
		t.Errorf("fast: first event %+v, last %+v", events[0], events[len(events)-1])
	}

	reasoning := capture("/model/reasoning/converse-stream", converse)
	_, sum = runInspectOutput(t, []string{reasoning}, nil)
	if s := sum.Summary; s.FirstResponse == nil || s.FirstText == nil || *s.FirstText <= *s.FirstResponse || count(s.Events, "reasoning") == 0 {
		t.Errorf("reasoning: summary %+v", s)
	}
	tool := capture("/model/tool-call/converse-stream", converse)
	_, sum = runInspectOutput(t, []string{tool}, nil)
	if s := sum.Summary; s.FirstResponse == nil || s.FirstText != nil || count(s.Events, "tool") == 0 || *s.FinishReason != "tool_use" {
		t.Errorf("tool-call: summary %+v", s)
	}
	exc := capture("/model/error-event/converse-stream", converse)
	_, sum = runInspectOutput(t, []string{exc}, nil)
	if s := sum.Summary; s.Terminal != "error" || !strings.HasSuffix(s.ErrorCode, "Exception") || s.FirstText == nil {
		t.Errorf("error-event: summary %+v", s)
	}
	trunc := capture("/model/truncate/converse-stream", converse)
	_, sum = runInspectOutput(t, []string{trunc}, nil)
	if s := sum.Summary; s.Terminal != "truncated" || s.FirstText == nil {
		t.Errorf("truncate: summary %+v", s)
	}

	// The fast stream cut 10 bytes into its third frame: the two whole
	// frames before it are read, and the stream is truncated.
	b, _ := os.ReadFile(fast)
	starts := frameStarts(t, b)
	cut := filepath.Join(dir, "cut.bin")
	os.WriteFile(cut, b[:starts[2]+10], 0o644)
	events, sum = runInspectOutput(t, []string{cut}, nil)
	if s := sum.Summary; len(events) != 2 || s.Terminal != "truncated" || !strings.Contains(s.ReadError, "inside a frame") || s.API != "bedrock.converse" {
		t.Errorf("cut inside the third frame: %d events, summary %+v", len(events), s)
	}

	// A byte of the third frame's payload flipped: its checksum fails.
	bad := bytes.Clone(b)
	bad[starts[3]-6] ^= 0x20
	corrupt := filepath.Join(dir, "crc.bin")
	os.WriteFile(corrupt, bad, 0o644)
	events, sum = runInspectOutput(t, []string{corrupt}, nil)
	if s := sum.Summary; len(events) != 2 || s.Terminal != "truncated" || !strings.Contains(s.ReadError, "CRC") {
		t.Errorf("a checksum mismatch in the third frame: %d events, summary %+v", len(events), s)
	}

	// InvokeModelWithResponseStream: Anthropic events inside the chunks.
	inv := capture("/model/fast/invoke-with-response-stream", `{"anthropic_version":"bedrock-2023-05-31","max_tokens":256,"messages":[{"role":"user","content":"Tell me."}]}`)
	events, sum = runInspectOutput(t, []string{inv}, nil)
	if s := sum.Summary; s.API != "anthropic" || len(events) != frames(inv) || s.Terminal != "done" || s.Tokens.Visible == nil || *s.Tokens.Visible != 60 || events[0].Type != "message_start" {
		t.Errorf("invoke: %d events of %d frames, first %+v, summary %+v", len(events), frames(inv), events[0], s)
	}
}

// frameStarts are the offsets of the frames of an event stream (each
// starts with its total length, big-endian).
func frameStarts(t *testing.T, b []byte) []int {
	t.Helper()
	var out []int
	for at := 0; at < len(b); at += int(binary.BigEndian.Uint32(b[at:])) {
		if len(b)-at < 4 {
			t.Fatalf("a partial length at %d of %d", at, len(b))
		}
		out = append(out, at)
	}
	if len(out) < 4 {
		t.Fatalf("%d frames", len(out))
	}
	return out
}
