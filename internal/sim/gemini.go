package sim

import (
	"encoding/json"
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
	r                         *response
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
		ModelVersion: e.r.model, ResponseID: e.r.id.geminiResponse}
}

func (e *geminiEncoder) usage(visible, reasoning, tools int) geminiUsage {
	cand := visible + tools
	return geminiUsage{PromptTokenCount: e.r.input, CandidatesTokenCount: cand,
		TotalTokenCount: e.r.input + cand + reasoning, ThoughtsTokenCount: reasoning}
}

func (e *geminiEncoder) running() geminiUsage { return e.usage(e.visible, e.reasoning, e.tools) }

func (e *geminiEncoder) final() geminiUsage {
	return e.usage(e.r.c.visibleTokens, e.r.c.reasoningTokens, e.r.c.toolTokens)
}

func (e *geminiEncoder) call() *geminiCall {
	return &geminiCall{Name: e.r.c.toolName, Args: json.RawMessage(e.r.c.toolArgs)}
}

func (e *geminiEncoder) frame(dst []byte, st step) []byte {
	switch st.kind {
	case stepStart:
		return appendCRLF(dst, e.chunk([]geminiPart{{Text: ptr("")}}, "", e.running()))
	case stepReasoning:
		e.reasoning += st.tokens
		return appendCRLF(dst, e.chunk([]geminiPart{{Text: ptr(st.text), Thought: true}}, "", e.running()))
	case stepToolStart:
		// Gemini sends a function call whole, in one part.
		e.tools = e.r.c.toolTokens
		return appendCRLF(dst, e.chunk([]geminiPart{{FunctionCall: e.call()}}, "", e.running()))
	case stepText:
		e.visible += st.tokens
		return appendCRLF(dst, e.chunk([]geminiPart{{Text: ptr(st.text)}}, "", e.running()))
	case stepHeartbeat:
		// Gemini sends no keep-alive, and its SDKs reject anything that
		// is not a data line (google.golang.org/genai: "invalid stream
		// chunk: : ping").
		return dst
	case stepFinish:
		// Hidden reasoning is counted now: it was never streamed.
		return appendCRLF(dst, e.chunk([]geminiPart{{Text: ptr("")}}, "STOP", e.final()))
	case stepError:
		dst = append(dst, "data: "...)
		dst = append(dst, errorBody(familyGemini, errorf(503, "The model is overloaded. Please try again later. (simulated fault error_event_after)"))...)
		return append(dst, "\r\n\r\n"...)
	}
	return dst
}

func (e *geminiEncoder) body() []byte {
	var parts []geminiPart
	for _, k := range e.r.order {
		switch k {
		case stepReasoning:
			parts = append(parts, geminiPart{Text: ptr(e.r.c.reasoningText), Thought: true})
		case stepTool:
			parts = append(parts, geminiPart{FunctionCall: e.call()})
		case stepText:
			parts = append(parts, geminiPart{Text: ptr(e.r.c.visibleText)})
		}
	}
	if len(parts) == 0 {
		parts = []geminiPart{{Text: ptr("")}}
	}
	return marshal(e.chunk(parts, "STOP", e.final()))
}
