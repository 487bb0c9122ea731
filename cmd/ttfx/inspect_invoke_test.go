package main

import (
	"encoding/base64"
	"testing"

	"github.com/ttfx/ttfx/internal/provider/bedrock/eventstream"
)

// TestInspectInvokeAPI: `ttfx inspect --api bedrock.invoke` reads an
// InvokeModelWithResponseStream file frame by frame as the gateway's
// InvokeModel clients' streams are recorded (one event per frame, the
// model's events inside classified, Bedrock's invocationMetrics read);
// without --api the same file is the Anthropic events inside.
func TestInspectInvokeAPI(t *testing.T) {
	var inv []byte
	for _, e := range []string{
		`{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":3,"output_tokens":1}}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
		`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":3,"outputTokenCount":2,"invocationLatency":310,"firstByteLatency":90}}`,
	} {
		inv = eventstream.Append(inv, []eventstream.Header{{Name: ":event-type", Value: "chunk"}, {Name: ":message-type", Value: "event"}},
			[]byte(`{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(e))+`"}`))
	}
	inv = append(inv, eventstream.AppendEvent(nil, "chunk", []byte(`{"bytes":"eyJub3QiOiJrbm93biJ9"}`))...) // {"not":"known"}
	events, sum := runInspectOutput(t, []string{"--api", "bedrock.invoke", "-"}, inv)
	s := sum.Summary
	if len(events) != 5 || s.API != "bedrock.invoke" || s.FirstText == nil || *s.FirstText != 1 || s.Terminal != "done" || s.FinishReason == nil || *s.FinishReason != "end_turn" || s.Events["unknown"] != 1 {
		t.Errorf("--api bedrock.invoke: %d events, summary %+v", len(events), s)
	}
	if events[0].Type != "message_start" || events[1].Kind != "text" {
		t.Errorf("events %+v", events)
	}
	events, sum = runInspectOutput(t, []string{"-"}, inv)
	if s := sum.Summary; s.API != "anthropic" || len(events) != 5 || s.Events["unknown"] != 1 {
		t.Errorf("sniffed: %d events, summary %+v", len(events), s)
	}
}
