package main

import (
	"encoding/base64"
	"testing"

	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
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
