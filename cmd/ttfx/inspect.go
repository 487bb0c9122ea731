package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/sse"
	"github.com/ttfx/ttfx/internal/wire"
)

func init() {
	register(command{name: "inspect", summary: "classify a recorded stream (.sse, or an AWS event-stream file) offline: each event's kind and where the milestones fell", run: runInspect})
}

var inspectUsage = `usage: ttfx inspect [--api API] FILE|-

Reads a recorded event stream (FILE, or standard input for -) and prints one
JSON line per dispatched SSE event — index (0-based over dispatched events;
comment lines are not events), kind (the most significant kind of SPEC §2),
kinds (all of them), type (the SSE event field), bytes (raw bytes of the
event), milestones (first_event, first_response, first_text where they fell)
— then a summary line:

  {"summary":{"api","first_event","first_response","first_text","terminal",
   "finish_reason","usage","events","tokens"}}

first_* are event indexes or null; terminal is done, truncated or error.

A stream in AWS's binary event stream (application/vnd.amazon.eventstream,
as Bedrock sends it) is recognised by its bytes: each frame is one event,
or, for frames that carry another API's events (InvokeModel's chunks), the
event inside. A file cut inside a frame, or with a frame whose checksum
does not match, lists the events before it, and the summary names why
it ended in "read_error".

API is one of ` + apiList() + `; without
--api it is detected from the stream.
`

func runInspect(_ context.Context, args []string) error {
	return inspectMain(args, os.Stdin, os.Stdout)
}

// inspectMain is runInspect with its input and output given, for tests.
func inspectMain(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	apiName := fs.String("api", "", "")
	files, err := parseFlags(fs, args, inspectUsage, stdout)
	if err != nil {
		return err
	}
	if len(files) != 1 {
		return usageError("want one FILE or -, got %d\n%s", len(files), inspectUsage)
	}
	var api protocol.API
	if *apiName != "" {
		a, err := protocol.ParseAPI(*apiName)
		if err != nil {
			return usageError("--api: %v", err)
		}
		api = a
	}

	var data []byte
	if files[0] == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(files[0])
	}
	if err != nil {
		return fmt.Errorf("read stream: %w", err)
	}
	var framing *wire.Framing
	if fa, f, ok := wire.SniffFraming(data); ok && (api == "" || api == fa) {
		// A stream in a framing other than SSE (AWS's event stream):
		// read with its reader, classified as the API it carries.
		api, framing = fa, f
	}
	if a := wire.LookupAPI(string(api)); framing == nil && a != nil && a.Framing != nil && a.Framing.NewReader != nil {
		// --api names an API whose own framing is not sniffed
		// (bedrock.invoke: its chunks are sniffed as the Anthropic
		// events inside): the file is read frame by frame as that API's.
		framing = a.Framing
	}
	if api == "" {
		a, ok := protocol.Detect(data)
		if !ok {
			name := files[0]
			if name == "-" {
				name = "standard input"
			}
			return fmt.Errorf("cannot tell the API of %s from its events; pass --api (%s)", name, apiList())
		}
		api = a
	}
	w := bufio.NewWriter(stdout)
	if err := inspect(w, data, api, framing); err != nil {
		return err
	}
	return w.Flush()
}

func apiList() string {
	names := make([]string, len(protocol.APIs()))
	for i, a := range protocol.APIs() {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// inspectLine is the JSON line of one dispatched event.
type inspectLine struct {
	Index      int      `json:"index"`
	Kind       string   `json:"kind"`
	Kinds      []string `json:"kinds"`
	Type       string   `json:"type,omitempty"`
	Bytes      int      `json:"bytes"`
	Milestones []string `json:"milestones,omitempty"`
}

// inspectSummary is the last line's "summary" object.
type inspectSummary struct {
	API           protocol.API      `json:"api"`
	FirstEvent    *int              `json:"first_event"`
	FirstResponse *int              `json:"first_response"`
	FirstText     *int              `json:"first_text"`
	Terminal      protocol.Terminal `json:"terminal"`
	FinishReason  *string           `json:"finish_reason"`
	ErrorCode     string            `json:"error_code,omitempty"`
	// ReadError is why a framed stream could not be read to its end (cut
	// inside a frame, a checksum mismatch); its events before that are
	// listed.
	ReadError string          `json:"read_error,omitempty"`
	Usage     protocol.Usage  `json:"usage"`
	Events    protocol.Counts `json:"events"`
	Tokens    inspectTokens   `json:"tokens"`
}

// inspectTokens are the §3 token counts, null where unknown.
type inspectTokens struct {
	Input     *int   `json:"input"`
	Output    *int   `json:"output"`
	Reasoning *int   `json:"reasoning"`
	Visible   *int   `json:"visible"`
	Source    string `json:"source"`
}

func intPtr(n int, ok bool) *int {
	if !ok {
		return nil
	}
	return &n
}

// inspect classifies the stream in data and writes the lines to w. A
// stream in another framing (an event-stream file) is read with that
// framing's reader: a stream of binary frames as its frames, or as the
// SSE events of the family they carry.
func inspect(w io.Writer, data []byte, api protocol.API, framing *wire.Framing) error {
	s := protocol.NewStream(api)
	var r interface{ Next() (*sse.Piece, error) } = sse.NewReader(bytes.NewReader(data), 0)
	if framing != nil {
		r = framing.NewReader(bytes.NewReader(data), 0)
	}
	enc := json.NewEncoder(w)
	var sum inspectSummary
	index := 0
	for {
		p, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil && framing != nil {
			// A framed stream cut inside a frame, or one whose frame
			// does not check: the events before it are the stream, as
			// the gateway relayed them, and the summary says why it
			// ended.
			sum.ReadError = err.Error()
			break
		}
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		res := s.Piece(p)
		if p.Kind != sse.PieceEvent {
			continue
		}
		line := inspectLine{
			Index: index,
			Kind:  res.Kinds.Primary().String(),
			Kinds: res.Kinds.List(),
			Type:  string(p.Event.Type),
			Bytes: len(p.Raw),
		}
		mark := func(first **int, name string, hit bool) {
			if hit && *first == nil {
				i := index
				*first = &i
				line.Milestones = append(line.Milestones, name)
			}
		}
		mark(&sum.FirstEvent, "first_event", res.Event)
		mark(&sum.FirstResponse, "first_response", res.Effective)
		mark(&sum.FirstText, "first_text", res.Visible)
		if err := enc.Encode(line); err != nil {
			return err
		}
		index++
	}
	sum.API = api
	sum.Terminal = s.Terminal()
	if fr := s.FinishReason(); fr != "" {
		sum.FinishReason = &fr
	}
	sum.ErrorCode = s.ErrorCode()
	sum.Usage = s.Usage()
	sum.Events = s.Counts()
	tk := s.Tokens()
	sum.Tokens = inspectTokens{
		Input:     intPtr(tk.Input, tk.HasInput),
		Output:    intPtr(tk.Output, tk.HasOutput),
		Reasoning: intPtr(tk.Reasoning, tk.HasReasoning),
		Visible:   intPtr(tk.Visible, tk.HasVisible),
		Source:    tk.Source,
	}
	return enc.Encode(struct {
		Summary inspectSummary `json:"summary"`
	}{sum})
}
