// Package protocol classifies the events of LLM provider streams (SPEC.md
// §2) and accounts for their tokens (§3), for every API whose unit
// registers a classifier (Register; internal/provider/<name>). The units
// hold each API's wire rules; this package holds what they share and names
// none.
//
// The gateway and the benchmark client run the same Stream over every event
// of every stream, so that both sides of the wire name the same milestones:
// an event with data (t3), the first effective content (t4: non-whitespace
// text, reasoning or tool-call arguments), the first visible text (t5). The
// hot path walks each event's JSON once with internal/jsonscan and does not
// allocate (see the benchmarks).
package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/ttfx/ttfx/internal/jsonscan"
	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/tokens"
)

// Kind is a set of the SPEC §2 kinds one event carries (one event can carry
// several: reasoning and text, tool arguments and a finish reason, text and
// usage).
type Kind uint16

// The kinds of §2. Text, Reasoning and Tool are only set for content with at
// least one non-whitespace character; empty or whitespace-only deltas are
// Metadata.
const (
	Heartbeat Kind = 1 << iota // SSE comments, empty data, ping and keepalive events
	Metadata                   // role-only, empty or usage-only chunks, block and item starts, tool-call headers, signatures
	Reasoning                  // reasoning or thinking text (also redacted/encrypted reasoning blocks)
	Tool                       // tool/function-call argument text, whole function calls
	Text                       // visible text (content, refusal, text deltas)
	Done                       // a terminal marker or a finish/stop reason
	Error                      // an in-stream error object
	Unknown                    // malformed or unrecognised
)

// primaryOrder ranks the kinds for Primary. Error comes first because it
// decides the stream's terminal state. Then content, latest milestone first:
// an event with text is where t5 falls even if it also carries reasoning or
// a tool call, and tool arguments are an action the user waits on more
// directly than reasoning. Done ranks below content so that a final chunk
// that carries the last text (or Mistral's whole tool call) with its
// finish_reason counts as content. Metadata and Heartbeat carry nothing the
// user sees; Unknown is last because any recognised part says more.
var primaryOrder = [...]Kind{Error, Text, Tool, Reasoning, Done, Metadata, Heartbeat, Unknown}

var kindName = map[Kind]string{
	Heartbeat: "heartbeat", Metadata: "metadata", Reasoning: "reasoning", Tool: "tool",
	Text: "text", Done: "done", Error: "error", Unknown: "unknown",
}

// Primary returns the most significant single kind in k (see primaryOrder:
// Error > Text > Tool > Reasoning > Done > Metadata > Heartbeat > Unknown),
// or 0 for the empty set.
func (k Kind) Primary() Kind {
	for _, p := range primaryOrder {
		if k&p != 0 {
			return p
		}
	}
	return 0
}

// Has reports whether k contains every kind in x.
func (k Kind) Has(x Kind) bool { return k&x == x && x != 0 }

// List returns the names of the kinds in k, most significant first.
func (k Kind) List() []string {
	var names []string
	for _, p := range primaryOrder {
		if k&p != 0 {
			names = append(names, kindName[p])
		}
	}
	return names
}

// String returns the kinds joined by "+", most significant first
// ("tool+done"), or "none" for the empty set.
func (k Kind) String() string {
	if k == 0 {
		return "none"
	}
	return strings.Join(k.List(), "+")
}

// Result is what one piece of a stream carried.
type Result struct {
	Kinds Kind
	// Event is set for a dispatched SSE event with non-empty data: a t3
	// candidate. Comments, blank lines, skipped blocks and events whose
	// data is empty or only white space are not.
	Event bool
	// Effective is set when the event carries non-whitespace text,
	// reasoning or tool-call arguments: a t4 candidate.
	Effective bool
	// Visible is set when the event carries non-whitespace visible text: a
	// t5 candidate.
	Visible bool
	// UsageOnly is set for an OpenAI chat usage-only chunk (no choices,
	// usage set), which the relay strips when it asked for
	// stream_options.include_usage itself (§3).
	UsageOnly bool
	// Terminal is set when the event carries a terminal marker, a
	// finish/stop reason or an error.
	Terminal bool
}

// Counts is the number of pieces of a stream per kind, each counted once
// under its Kinds.Primary(); comment lines count one heartbeat each.
type Counts struct {
	Heartbeat int `json:"heartbeat"`
	Metadata  int `json:"metadata"`
	Reasoning int `json:"reasoning"`
	Tool      int `json:"tool"`
	Text      int `json:"text"`
	Done      int `json:"done"`
	Error     int `json:"error"`
	Unknown   int `json:"unknown"`
}

func (c *Counts) add(k Kind, n int) {
	switch k.Primary() {
	case Heartbeat:
		c.Heartbeat += n
	case Metadata:
		c.Metadata += n
	case Reasoning:
		c.Reasoning += n
	case Tool:
		c.Tool += n
	case Text:
		c.Text += n
	case Done:
		c.Done += n
	case Error:
		c.Error += n
	case Unknown:
		c.Unknown += n
	}
}

// Usage is a provider's token report. Output counts every generated token,
// reasoning included (completion_tokens, output_tokens, candidates plus
// thoughts: each API's own names); Input counts every prompt token, cached
// ones included (input plus cache creation plus cache reads where a provider
// reports them apart). A Has flag is false
// when the provider did not report that count.
type Usage struct {
	Input, Output, Reasoning          int
	HasInput, HasOutput, HasReasoning bool
}

// merge lays a later report over u count by count: a report that omits a
// count does not erase an earlier one. Only an API whose classifier says
// SplitUsage is merged this way, because it splits one report across two
// events by design (input at the start, output at the end); the others send
// complete, cumulative reports, and the last one replaces the earlier ones
// whole (§2: "the last complete report wins") — see Stream.Event.
func (u *Usage) merge(v Usage) {
	if v.HasInput {
		u.Input, u.HasInput = v.Input, true
	}
	if v.HasOutput {
		u.Output, u.HasOutput = v.Output, true
	}
	if v.HasReasoning {
		u.Reasoning, u.HasReasoning = v.Reasoning, true
	}
}

func (u Usage) Any() bool { return u.HasInput || u.HasOutput || u.HasReasoning }

// MarshalJSON writes {"input","output","reasoning"} with null for a count
// that was not reported.
func (u Usage) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Input     *int `json:"input"`
		Output    *int `json:"output"`
		Reasoning *int `json:"reasoning"`
	}{ptr(u.Input, u.HasInput), ptr(u.Output, u.HasOutput), ptr(u.Reasoning, u.HasReasoning)})
}

func ptr(n int, ok bool) *int {
	if !ok {
		return nil
	}
	return &n
}

// Token sources (SPEC §3 tokens_source).
const (
	SourceUsage    = "usage"    // visible tokens came from the provider's usage
	SourceEstimate = "estimate" // visible tokens were counted with the tokenizer
)

// Tokens are the token counts of a stream or response for the record (§3).
// Input, Output and Reasoning are the provider's usage; Visible is output −
// reasoning when the usage can tell, otherwise a tokenizer estimate over the
// visible text, and Source says which. A Has flag is false when the count
// is unknown.
type Tokens struct {
	Input, Output, Reasoning, Visible             int
	HasInput, HasOutput, HasReasoning, HasVisible bool
	Source                                        string // SourceUsage, SourceEstimate, or "" when nothing was seen
}

// Terminal is how a stream ended.
type Terminal uint8

// Terminal states. The zero value is TerminalTruncated: a stream that showed
// no terminal marker, finish reason or error ended truncated, even if the
// connection closed cleanly (§2: "closed" is not "succeeded").
const (
	TerminalTruncated Terminal = iota
	TerminalDone
	TerminalError
)

// String returns "truncated", "done" or "error".
func (t Terminal) String() string {
	switch t {
	case TerminalDone:
		return "done"
	case TerminalError:
		return "error"
	default:
		return "truncated"
	}
}

// MarshalText writes the String form, for JSON.
func (t Terminal) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// maxVisible bounds the visible text a Stream keeps uncounted for the
// estimate: 64 KiB (about 16,000 tokens). Text is counted as it settles
// (compact), so only text with neither a space after a word nor a line
// break (Japanese without line breaks, one huge run of letters) comes near
// it; past it the estimate is extrapolated by the byte ratio. The bound is
// what an open stream holds at most for its estimate, and what the
// estimate costs at its end, in the handler before the response's last
// chunk goes out: counting 64 KiB
// takes about 2.5 ms of CPU for prose and code and 7.5 ms for Japanese,
// whose runs of letters are long pieces to merge (BenchmarkEstimateAtBound;
// prose took 11–15 ms and 4.8 MB of allocations with tiktoken-go, 185 ms
// and 85 MB for 1 MiB before that). An estimate is an estimate anyway:
// o200k_base and a provider's own tokenizer differ by more than the
// extrapolation adds.
const maxVisible = 64 << 10

// compactAt is how much visible text a Stream keeps before Compact counts
// the part of it that later text cannot change and lets it go: every 500
// tokens or so, about 50 µs of counting each time. A stream 1000 tokens in
// then holds about 2 KB more than one that just started, where it held
// 6 KB more with 4 KiB here and 28 KB more at 5000 tokens with no
// counting as it goes (BenchmarkOverheadMemory in internal/relay).
const compactAt = 2 << 10

// maxCounted bounds the visible text a stream counts: past 256 KiB (about
// 64,000 tokens, more than most models answer at once) the estimate
// extrapolates by bytes from it. It bounds what counting costs a stream:
// about 7 ms for prose and code, 30 ms for Japanese, and at most about
// 170 ms for text built to be slow to merge (256 KiB of one letter or of
// spaces in one piece: about 0.65 µs a byte).
const maxCounted = 256 << 10

// Content is what a stream or a response body carried so far, for token
// accounting: the usage, which kinds of content appeared, and the visible
// text, counted as it settles (Compact) or kept whole up to maxVisible.
type Content struct {
	usage        Usage
	SawText      bool
	SawReasoning bool
	SawTool      bool
	visible      []byte // unescaped visible text not counted yet, at most about maxVisible bytes
	counted      int    // tokens of the visible text Compact counted and let go
	uncut        int    // no place in visible before uncut is one tokens.Cut would cut at
	visibleRaw   int    // raw (escaped) bytes of the text counted and in visible
	rawTotal     int    // raw bytes of all visible text seen
}

// addVisible records the raw JSON string contents of visible text. Once
// text was left out (visible was full, or maxCounted was counted), none
// after it is kept either: the estimate extrapolates from a beginning
// without gaps.
func (c *Content) addVisible(raw []byte) {
	if len(raw) == 0 {
		return
	}
	full := c.rawTotal > c.visibleRaw
	c.rawTotal += len(raw)
	if room := min(maxVisible-len(c.visible), maxCounted-c.visibleRaw); room > 0 && !full {
		if len(raw) > room {
			raw = raw[:room]
		}
		c.visible = jsonscan.AppendUnescaped(c.visible, raw)
		c.visibleRaw += len(raw)
	}
}

// compact counts visible up to the last place where later text cannot
// change its tokens (tokens.Cut) and drops that part, once more than
// compactAt is kept.
func (c *Content) compact() {
	if len(c.visible) < compactAt {
		return
	}
	// Only the text after the last search is searched, so text without a
	// cut costs about one pass in all.
	cut := tokens.Cut(c.visible, c.uncut)
	if cut == 0 {
		// Nowhere to cut (no space after a word, no line break before
		// one): the text stays whole up to maxVisible. The last rune may
		// be cut short; its place is searched again.
		c.uncut = max(len(c.visible)-utf8.UTFMax, 0)
		return
	}
	c.counted += tokens.CountBytes(c.visible[:cut])
	tail := c.visible[cut:]
	if cap(c.visible) > 4*compactAt && len(tail) <= compactAt {
		// A burst grew the buffer: let it go with the text.
		c.visible = append(make([]byte, 0, 2*compactAt), tail...)
	} else {
		c.visible = c.visible[:copy(c.visible, tail)]
	}
	// The cut was the last one; a rune cut short at the end is searched
	// again.
	c.uncut = max(len(c.visible)-utf8.UTFMax, 0)
}

// estimate counts the tokens of the visible text, extrapolating by bytes
// past what was kept.
func (c *Content) estimate() int {
	n := c.counted + tokens.CountBytes(c.visible)
	if c.rawTotal > c.visibleRaw && c.visibleRaw > 0 {
		n = int(float64(n) * float64(c.rawTotal) / float64(c.visibleRaw))
	}
	return n
}

// estimateFloor is a cheap stand-in for estimate that is below it for
// ordinary text: o200k_base averages about 4 bytes a token on English and
// code, and rarely more than 8, so raw bytes / 8 stays under the count.
func (c *Content) estimateFloor() int { return c.rawTotal / 8 }

// hiddenMargin decides when a usage report that does not break reasoning out
// cannot be the visible text alone: output > 2 × estimate + 16. The factor
// absorbs tokenizer differences between o200k_base and the provider's own
// (they differ by well under 2× on text); the constant absorbs short texts.
// OpenRouter's nemotron reports 47 completion tokens for "Hi there!" (3
// tokens) because it counts hidden reasoning.
func hiddenMargin(estimate int) int { return 2*estimate + 16 }

// tokens derives the §3 token counts. seen says whether anything was
// classified at all (a stream with no event has no counts to give).
func (c *Content) tokens(seen bool) Tokens {
	u := c.usage
	t := Tokens{
		Input: u.Input, HasInput: u.HasInput,
		Output: u.Output, HasOutput: u.HasOutput,
		Reasoning: u.Reasoning, HasReasoning: u.HasReasoning,
	}
	if !seen && !u.Any() {
		return t
	}
	t.HasVisible = true
	// Usage gives the visible count when its output is all visible text, or
	// all of it but the reasoning it breaks out. It cannot when the stream
	// had tool arguments (counted in output by every provider), or
	// reasoning that the usage lumps in with the text. A
	// reasoning count of 0 breaks nothing out: OpenAI-compatible servers
	// fill completion_tokens_details with zeros whatever the model did
	// (OpenRouter reports reasoning_tokens 0 beside streamed reasoning), so
	// it is treated as absent — estimated when reasoning was streamed, and
	// held to the hidden-reasoning margin when it was not.
	brokenOut := u.HasReasoning && u.Reasoning > 0
	switch {
	case u.HasOutput && !c.SawTool && (brokenOut || !c.SawReasoning):
		v := u.Output
		if brokenOut {
			v -= u.Reasoning
		}
		t.Visible, t.Source = max(v, 0), SourceUsage
		// Counting costs about 0.1 µs a token, so the margin is first
		// checked against a cheap floor of the count; only a report that
		// passes the floor's margin is checked against the real estimate.
		if !brokenOut && v > hiddenMargin(c.estimateFloor()) {
			if est := c.estimate(); v > hiddenMargin(est) {
				t.Visible, t.Source = est, SourceEstimate
			}
		}
	case c.SawText:
		t.Visible, t.Source = c.estimate(), SourceEstimate
	default:
		t.Source = SourceEstimate
	}
	// No visible text at all (none, or only white space): 0 visible tokens,
	// whatever the usage's output holds (reasoning, tool input, filtered
	// text — nothing the user read). The source stays what the rule above
	// chose: "usage" when the provider's report would have been taken as
	// the visible count (output with no tool content, no lumped reasoning,
	// within the hidden-reasoning margin), "estimate" otherwise (no usage,
	// or one that lumps tool or reasoning content in). visible_output_tps
	// is absent for such a stream anyway: it has no first visible text.
	if !c.SawText {
		t.Visible = 0
	}
	return t
}

// Event is what one event carries, collected while its JSON is walked and
// applied to the Stream only when the whole event parsed.
type Event struct {
	Kinds     Kind
	usage     Usage
	Finish    []byte // finish/stop reason, raw (escapes in place); valid while the event's data is
	finishIdx int    // the index of the chat choice finish belongs to (0 in the other APIs)
	ErrCode   []byte // error type or code, raw
	UsageOnly bool
	// end is set for a marker that ends the whole stream whatever its
	// choices did (`[DONE]`); a chat finish_reason ends only its choice.
	End bool
	// seen and finished are the chat choice indexes the event carried and
	// the ones among them that gave a finish_reason.
	Seen, Finished ChoiceSet
	// LatencyMs is a provider's own latency figure the event carried
	// (Bedrock's metrics.latencyMs), when HasLatency.
	LatencyMs  int
	HasLatency bool
}

// SetFinish records the finish reason of choice idx. Of several choices the
// lowest index wins (choice 0, the one a client with n = 1 reads); a later
// finish of the same choice replaces an earlier one.
func (e *Event) SetFinish(idx int, r []byte) {
	if e.Finish == nil || idx <= e.finishIdx {
		e.Finish, e.finishIdx = r, idx
	}
}

// ChoiceSet is a set of chat choice indexes 0–127 (OpenAI's n is at most
// 128); a larger index counts as 127, so a stream of more choices than that
// may be taken for finished once choice 127 and above all gave one finish.
type ChoiceSet [2]uint64

func (s *ChoiceSet) Add(i int) {
	i = min(max(i, 0), 127)
	s[i>>6] |= 1 << (i & 63)
}

func (s *ChoiceSet) union(t ChoiceSet) { s[0], s[1] = s[0]|t[0], s[1]|t[1] }

func (s ChoiceSet) empty() bool { return s[0]|s[1] == 0 }

// within reports whether every index of s is in t.
func (s ChoiceSet) within(t ChoiceSet) bool { return s[0]&^t[0] == 0 && s[1]&^t[1] == 0 }

// Report records a usage report of the event; a second one in the same
// event (a repeated key) replaces the first, as encoding/json would.
func (e *Event) Report(u Usage) {
	if u.Any() {
		e.usage = u
		e.Kinds |= Metadata
	}
}

// Stream is the classification state of one stream. Not safe for
// concurrent use; one Stream per stream.
type Stream struct {
	api     API
	cl      *Classifier // nil for an API no unit registered: every event is Unknown
	ev      Event       // the event being classified (see Event)
	c       Content
	counts  Counts
	events  int // dispatched events with data
	sawDone bool
	sawErr  bool
	// The chat choices seen and those that finished: a chat stream is done
	// when every choice it showed gave a finish_reason (or at [DONE]).
	choices, finished ChoiceSet
	finish            string
	finishIdx         int // the choice finish belongs to (see event.setFinish)
	errCode           string
	latencyMs         int // the provider's own latency figure, when hasLatency
	hasLatency        bool
	// scratch holds a finish reason or error code unescaped ("\u0073top"
	// is "stop"), so that the common ones still intern without allocating.
	scratch [64]byte
}

// NewStream returns a Stream for a stream of api.
// An API no unit registered classifies every event with data as Unknown.
func NewStream(api API) *Stream { return &Stream{api: api, cl: classifiers[api]} }

// API returns the stream's API.
func (s *Stream) API() API { return s.api }

// Piece classifies one piece yielded by an sse.Reader: comments are
// heartbeats (one per comment line; a piece of blank lines only carries
// nothing), malformed and incomplete blocks are Unknown, events are
// classified by Event. A skipped block (only `event:`, `id:` or `retry:`
// lines) is valid SSE that dispatches no event: like blank lines it
// carries nothing and is not counted (Kinds 0).
func (s *Stream) Piece(p *sse.Piece) Result {
	switch p.Kind {
	case sse.PieceEvent:
		if s.cl != nil && s.cl.Exception != nil {
			if code, ok := s.cl.Exception(p.Raw); ok {
				return s.exception(code)
			}
		}
		return s.Event(&p.Event)
	case sse.PieceComment:
		n := commentLines(p.Raw)
		if n == 0 {
			return Result{}
		}
		s.counts.Heartbeat += n
		return Result{Kinds: Heartbeat}
	case sse.PieceSkipped:
		return Result{}
	default:
		s.counts.Unknown++
		return Result{Kinds: Unknown}
	}
}

// exception counts a message of the API's own framing that says the stream
// failed (Classifier.Exception): an error event, terminal whatever its
// payload says, code its error code.
func (s *Stream) exception(code []byte) Result {
	s.events++
	s.counts.Error++
	s.sawErr = true
	if len(code) > 0 && s.errCode != string(code) {
		s.errCode = string(code)
	}
	return Result{Kinds: Error, Event: true, Terminal: true}
}

// commentLines counts the lines of raw that start with ':' (a leading BOM
// of the stream is not part of the line).
func commentLines(raw []byte) int {
	raw = bytes.TrimPrefix(raw, []byte("\xEF\xBB\xBF"))
	n := 0
	start := true
	for i, c := range raw {
		if start && c == ':' {
			n++
		}
		start = c == '\n' || (c == '\r' && (i+1 >= len(raw) || raw[i+1] != '\n'))
	}
	return n
}

// Event classifies one dispatched event. An event whose data is empty or
// only white space (a lone `data:` line) is a heartbeat, not a t3 event.
// `data: [DONE]` is done in every API (§2), not only in chat streams.
func (s *Stream) Event(ev *sse.Event) Result {
	data := TrimSpace(ev.Data)
	if len(data) == 0 {
		s.counts.Heartbeat++
		return Result{Kinds: Heartbeat}
	}
	s.events++
	if len(s.c.visible) >= maxVisible/2 {
		// The relay compacts while it waits for the upstream; text that
		// came faster than it ever waited is compacted here, before the
		// bound would leave it out.
		s.c.compact()
	}
	mark := s.c
	// The event is collected in the Stream, not on the stack: the
	// classifier is called through a function value, which escape
	// analysis cannot see through, so a local would move to the heap on
	// every event.
	e := &s.ev
	*e = Event{}
	ok := false
	switch {
	case string(data) == "[DONE]":
		// OpenAI's end marker. Compatible proxies add it to the other
		// APIs' streams too; wherever it comes it says the stream
		// ended.
		e.Kinds, e.End, ok = Done, true, true
	case s.cl != nil:
		ok = s.cl.Event(&s.c, e, ev.Type, data)
	}
	if !ok {
		// Nothing of a malformed event counts: restore the visible text
		// (the slice only grew, so truncating restores it) and flags.
		vis := s.c.visible[:len(mark.visible)]
		s.c = mark
		s.c.visible = vis
		*e = Event{Kinds: Unknown}
	}
	if e.Kinds == 0 {
		e.Kinds = Metadata
	}
	r := Result{
		Kinds:     e.Kinds,
		Event:     true,
		Effective: e.Kinds&(Text|Reasoning|Tool) != 0,
		Visible:   e.Kinds&Text != 0,
		UsageOnly: e.UsageOnly,
		Terminal:  e.Kinds&(Done|Error) != 0,
	}
	s.counts.add(e.Kinds, 1)
	s.c.SawText = s.c.SawText || e.Kinds&Text != 0
	s.c.SawReasoning = s.c.SawReasoning || e.Kinds&Reasoning != 0
	s.c.SawTool = s.c.SawTool || e.Kinds&Tool != 0
	// A finish that ends only its choice (Classifier.PerChoice) does not
	// end the stream (n > 1); every other API's done, and [DONE], does.
	s.sawDone = s.sawDone || e.End || (!s.perChoice() && e.Kinds&Done != 0)
	s.choices.union(e.Seen)
	s.finished.union(e.Finished)
	s.sawErr = s.sawErr || e.Kinds&Error != 0
	if e.usage.Any() {
		if s.cl.SplitUsage {
			s.c.usage.merge(e.usage) // one report in several events, see merge
		} else {
			s.c.usage = e.usage // the last complete report wins
		}
	}
	if len(e.Finish) > 0 && (s.finish == "" || e.finishIdx <= s.finishIdx) {
		if f := unescape(s.scratch[:0], e.Finish); s.finish != string(f) {
			s.finish = intern(f)
		}
		s.finishIdx = e.finishIdx
	}
	if len(e.ErrCode) > 0 {
		if c := unescape(s.scratch[:0], e.ErrCode); s.errCode != string(c) {
			s.errCode = string(c)
		}
	}
	if e.HasLatency {
		s.latencyMs, s.hasLatency = e.LatencyMs, true
	}
	return r
}

// ProviderLatencyMs returns the provider's own figure for the request's
// latency in milliseconds (Bedrock's metrics.latencyMs), and whether the
// stream gave one.
func (s *Stream) ProviderLatencyMs() (int, bool) { return s.latencyMs, s.hasLatency }

// DataEvents returns the dispatched events with data seen so far (SSE
// comments and empty events not included): in a Responses stream, the
// sequence_number the next event would carry.
func (s *Stream) DataEvents() int { return s.events }

// Counts returns the pieces seen so far per primary kind.
func (s *Stream) Counts() Counts { return s.counts }

// Usage returns the provider's usage as reported so far: the last report
// whole, or for a SplitUsage API the counts of its events merged (input
// from the first, output from the last).
func (s *Stream) Usage() Usage { return s.c.usage }

// FinishReason returns the last finish/stop reason the stream gave
// (finish_reason, stop_reason, finishReason — e.g.
// MALFORMED_FUNCTION_CALL, which ends the stream as done but with no
// output — or a Responses status), or "". Of a chat stream with several
// choices (n > 1) it is choice 0's (the lowest index that gave one).
func (s *Stream) FinishReason() string { return s.finish }

// ErrorCode returns the type or code of the last in-stream error
// ("overloaded_error", "server_error", "INTERNAL"), or "". Error messages
// are not kept: they may quote the request.
func (s *Stream) ErrorCode() string { return s.errCode }

// Terminal returns how the stream ended; call it after the stream ended.
// An error wins over a terminal marker (providers often send [DONE] after
// an error chunk). A chat stream is done at [DONE], or when every choice
// index it showed gave a finish_reason: with n > 1, one choice finishing
// while another still streams is not the end, and a stream that closes
// then is truncated.
func (s *Stream) Terminal() Terminal {
	switch {
	case s.sawErr:
		return TerminalError
	case s.sawDone, !s.choices.empty() && s.choices.within(s.finished):
		return TerminalDone
	default:
		return TerminalTruncated
	}
}

// Tokens returns the §3 token counts: the usage, and visible tokens from the
// usage (output − reasoning when reasoning is broken out with a count above
// 0, output when there was no reasoning or tool content) or else a
// tokenizer estimate over the visible text seen. A usage that does not
// break reasoning out and reports far more output than the visible text
// could hold (hidden reasoning, as OpenRouter's reasoning models report) is
// not taken as the visible count. A stream with no visible text has 0
// visible tokens. It runs the tokenizer: call it once, after the stream
// ended.
func (s *Stream) Tokens() Tokens { return s.c.tokens(s.events > 0) }

// VisibleText returns the visible text kept so far and not yet counted by
// Compact (at most about maxVisible bytes), for tests and offline tools;
// the gateway never stores it.
func (s *Stream) VisibleText() string { return string(s.c.visible) }

// Compact counts the visible text kept so far, up to the last place later
// text cannot change (tokens.Cut: a space after a word, a line break), and
// lets it go, once more than 2 KiB is kept. A long answer then holds a few
// KiB of its text rather than up to maxVisible, and its estimate counts
// all of it, up to maxCounted, instead of extrapolating past maxVisible
// (text with no such place, as Japanese without line breaks, is still kept
// and extrapolated). It runs the tokenizer, about 0.1 µs a token: the relay
// calls it while it waits for the upstream, after the client has the
// bytes so far, not between an event's arrival and its write.
func (s *Stream) Compact() { s.c.compact() }

// TrimSpace trims ASCII white space (what JSON and SSE allow) from both ends of b.
func TrimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// unescape returns the text of the raw contents of a JSON string: raw itself
// when it has no escapes, else raw decoded into dst.
func unescape(dst, raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	return jsonscan.AppendUnescaped(dst, raw)
}

// intern returns common finish reasons as constants so that recording them
// does not allocate; others are copied.
func intern(b []byte) string {
	switch string(b) {
	case "stop":
		return "stop"
	case "length":
		return "length"
	case "tool_calls":
		return "tool_calls"
	case "function_call":
		return "function_call"
	case "content_filter":
		return "content_filter"
	case "end_turn":
		return "end_turn"
	case "tool_use":
		return "tool_use"
	case "max_tokens":
		return "max_tokens"
	case "stop_sequence":
		return "stop_sequence"
	case "STOP":
		return "STOP"
	case "MAX_TOKENS":
		return "MAX_TOKENS"
	case "SAFETY":
		return "SAFETY"
	case "completed":
		return "completed"
	}
	return string(b)
}
