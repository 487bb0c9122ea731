package geminisim

import (
	"encoding/json"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sim"
)

// Gemini (POST /v1beta/models/{model}:streamGenerateContent?alt=sse and
// :generateContent), as the fixtures google__gemini-*.sse show: every chunk
// is a GenerateContentResponse with candidates[0].content.parts, thought
// parts marked "thought": true, a function call as one whole functionCall
// part, usageMetadata with the running counts on every chunk
// (thoughtsTokenCount and candidatesTokenCount left out while zero), and a
// last chunk with an empty text part and finishReason STOP. Events are
// framed with CRLF and there is no [DONE]. Gemini itself sends no metadata
// chunk before content; the simulator sends one part with empty text at
// the first-event time so that every protocol shows the profile's
// first_event_ms (an empty part is metadata by SPEC.md §2).

type geminiEncoder struct {
	r                         *sim.Response
	visible, reasoning, tools int // tokens sent so far
}

type geminiPart struct {
	Text         *string         `json:"text,omitempty"`
	Thought      bool            `json:"thought,omitempty"`
	FunctionCall *geminiCall     `json:"functionCall,omitempty"`
	Signature    json.RawMessage `json:"thoughtSignature,omitempty"`
}

type geminiCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type geminiUsage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount,omitempty"`
	TotalTokenCount      int `json:"totalTokenCount"`
	ThoughtsTokenCount   int `json:"thoughtsTokenCount,omitempty"`
}

type geminiCandidate struct {
	Content struct {
		Parts []geminiPart `json:"parts"`
		Role  string       `json:"role"`
	} `json:"content"`
	FinishReason string `json:"finishReason,omitempty"`
	Index        int    `json:"index"`
}

type geminiResponse struct {
	Candidates    []geminiCandidate `json:"candidates"`
	UsageMetadata geminiUsage       `json:"usageMetadata"`
	ModelVersion  string            `json:"modelVersion"`
	ResponseID    string            `json:"responseId"`
}

func (e *geminiEncoder) chunk(parts []geminiPart, finish string, u geminiUsage) geminiResponse {
	c := geminiCandidate{FinishReason: finish}
	c.Content.Parts, c.Content.Role = parts, "model"
	return geminiResponse{Candidates: []geminiCandidate{c}, UsageMetadata: u,
		ModelVersion: e.r.Model, ResponseID: e.r.ID.Short}
}

func (e *geminiEncoder) usage(visible, reasoning, tools int) geminiUsage {
	cand := visible + tools
	return geminiUsage{PromptTokenCount: e.r.Input, CandidatesTokenCount: cand,
		TotalTokenCount: e.r.Input + cand + reasoning, ThoughtsTokenCount: reasoning}
}

func (e *geminiEncoder) running() geminiUsage { return e.usage(e.visible, e.reasoning, e.tools) }

func (e *geminiEncoder) final() geminiUsage {
	return e.usage(e.r.VisibleTokens, e.r.ReasoningTokens, e.r.ToolTokens)
}

func (e *geminiEncoder) call() *geminiCall {
	return &geminiCall{Name: e.r.ToolName, Args: json.RawMessage(e.r.ToolArgs)}
}

func (e *geminiEncoder) Frame(dst []byte, st sim.Step) []byte {
	switch st.Kind {
	case sim.StepStart:
		return sim.AppendCRLF(dst, e.chunk([]geminiPart{{Text: sim.Ptr("")}}, "", e.running()))
	case sim.StepReasoning:
		e.reasoning += st.Tokens
		return sim.AppendCRLF(dst, e.chunk([]geminiPart{{Text: sim.Ptr(st.Text), Thought: true}}, "", e.running()))
	case sim.StepToolStart:
		// Gemini sends a function call whole, in one part.
		e.tools = e.r.ToolTokens
		return sim.AppendCRLF(dst, e.chunk([]geminiPart{{FunctionCall: e.call()}}, "", e.running()))
	case sim.StepText:
		e.visible += st.Tokens
		return sim.AppendCRLF(dst, e.chunk([]geminiPart{{Text: sim.Ptr(st.Text)}}, "", e.running()))
	case sim.StepHeartbeat:
		// Gemini sends no keep-alive, and its SDKs reject anything that
		// is not a data line (google.golang.org/genai: "invalid stream
		// chunk: : ping").
		return dst
	case sim.StepFinish:
		// Hidden reasoning is counted now: it was never streamed.
		return sim.AppendCRLF(dst, e.chunk([]geminiPart{{Text: sim.Ptr("")}}, "STOP", e.final()))
	case sim.StepError:
		dst = append(dst, "data: "...)
		dst = append(dst, errorBody(protocol.ErrorResponse{Status: 503, Message: "The model is overloaded. Please try again later. (simulated fault error_event_after)"})...)
		return append(dst, "\r\n\r\n"...)
	}
	return dst
}

func (e *geminiEncoder) Body() []byte {
	var parts []geminiPart
	for _, k := range e.r.Order {
		switch k {
		case sim.StepReasoning:
			parts = append(parts, geminiPart{Text: sim.Ptr(e.r.ReasoningText), Thought: true})
		case sim.StepTool:
			parts = append(parts, geminiPart{FunctionCall: e.call()})
		case sim.StepText:
			parts = append(parts, geminiPart{Text: sim.Ptr(e.r.VisibleText)})
		}
	}
	if len(parts) == 0 {
		parts = []geminiPart{{Text: sim.Ptr("")}}
	}
	return sim.Marshal(e.chunk(parts, "STOP", e.final()))
}
