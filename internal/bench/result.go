package bench

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/ttfx/ttfx/internal/protocol"
	"github.com/ttfx/ttfx/internal/timeline"
)

// Format is the result file's format name; a reader refuses other formats.
const Format = "ttfx-bench/1"

// Result is a benchmark run as written to its JSON file (SPEC.md §9):
// the conditions, one row per measured request, and the summary.
type Result struct {
	Format     string     `json:"format"`
	Run        RunInfo    `json:"run"`
	Conditions Conditions `json:"conditions"`
	Warmup     Warmup     `json:"warmup"`
	Requests   []Row      `json:"requests"`
	Summary    Summary    `json:"summary"`
}

// RunInfo identifies a run. None of it is a condition.
type RunInfo struct {
	ID      string    `json:"id"`      // random hex, also in each row's run
	Host    string    `json:"host"`    // the machine's host name
	Started time.Time `json:"started"` // wall-clock time of the measured window's start, UTC
	// Interrupted is set when the run was stopped before its sample was
	// complete; its rows are what was measured until then.
	Interrupted bool `json:"interrupted"`
	// Sources lists the runs a merged result was made from; empty for a
	// run made directly.
	Sources []Source `json:"sources,omitempty"`
}

// Source is one run that went into a merged result.
type Source struct {
	ID       string    `json:"id"`
	Host     string    `json:"host"`
	Started  time.Time `json:"started"`
	Requests int       `json:"requests"`
	// WindowMs is the source's own measured window (first request
	// written to last byte, on its own monotonic clock).
	WindowMs timeline.Span `json:"window_ms"`
}

// Warmup reports the requests run before the measured ones, excluded from
// the rows and summary.
type Warmup struct {
	Requests int            `json:"requests"`
	OK       int            `json:"ok"`
	Statuses map[string]int `json:"statuses"`
}

// Row is one measured request. Marks are offsets from the moment its
// request was written (see Client.Do) and absent (null) when they did not
// happen, never 0. Nothing of the prompt or the response text is kept.
type Row struct {
	Run   string `json:"run"`   // the run's id
	Index int    `json:"index"` // order of scheduling within the run's measured requests, from 0
	// StartMs is when the request was written, from the start of the
	// run's measured window; DueMs when the schedule wanted it started
	// (its arrival time in rate mode; when its worker became free in
	// concurrency mode); SchedLagMs how late the bench started it
	// (just before Do − due): the bench's own scheduling error.
	StartMs    timeline.Offset `json:"start_ms"`
	DueMs      timeline.Offset `json:"due_ms"`
	SchedLagMs timeline.Span   `json:"sched_lag_ms"`
	// WriteMs is from just before Do to the request written (connection
	// set-up and writing the request); 0 when the origin fell back to
	// the time before Do.
	WriteMs    timeline.Span `json:"write_ms"`
	ConnReused bool          `json:"conn_reused"` // the last attempt used a kept-alive connection

	Status       string `json:"status"`        // one of Statuses
	Phase        string `json:"phase"`         // where a failure happened (Phase*); empty when ok
	HTTPStatus   int    `json:"http_status"`   // 0 when no response arrived
	Error        string `json:"error"`         // short summary written by the bench; never response text
	ErrorCode    string `json:"error_code"`    // the provider's error type or code, if it gave one
	Terminal     string `json:"terminal"`      // how the stream ended: done, truncated, error; empty without a body
	FinishReason string `json:"finish_reason"` // the provider's finish/stop reason
	Attempts     int    `json:"attempts"`      // 1 without retries
	RequestID    string `json:"request_id"`    // X-Request-Id (or Request-Id) of the response

	TimeToHeadersMs     timeline.Offset `json:"time_to_headers_ms"`
	FirstSSEEventMs     timeline.Offset `json:"first_sse_event_ms"`
	FirstResponseMs     timeline.Offset `json:"first_response_ms"`
	FirstTextDeltaMs    timeline.Offset `json:"first_text_delta_ms"`
	EndToEndMs          timeline.Offset `json:"end_to_end_ms"` // last byte, or the failure, for any reason
	VisibleOutputTPS    timeline.Rate   `json:"visible_output_tps"`
	InterTokenLatencyMs timeline.Span   `json:"inter_token_latency_ms"`

	Tokens RowTokens       `json:"tokens"`
	Events protocol.Counts `json:"events"` // pieces per kind of SPEC §2, each under its most significant kind
	Bytes  int64           `json:"bytes"`  // response body bytes read

	Gateway *GatewayJoin `json:"gateway,omitempty"` // the gateway's record and the split; absent without --gateway-key

	origin time.Time // the origin of the marks (the request written)
	start  time.Time // just before the first attempt's Do
}

// RowTokens are a row's token counts; a nil count is unknown.
type RowTokens struct {
	Prompt    int    `json:"prompt"`    // the synthetic prompt's text in o200k_base tokens, as the bench measured it
	Input     *int   `json:"input"`     // the provider's usage: prompt tokens (with its template)
	Output    *int   `json:"output"`    // the provider's usage: all generated tokens, reasoning included
	Reasoning *int   `json:"reasoning"` // the provider's usage, when it breaks reasoning out
	Visible   *int   `json:"visible"`   // visible output tokens (SPEC §3)
	Source    string `json:"source"`    // where Visible came from: usage or estimate
}

// ok reports whether the row succeeded, failed reports whether it failed
// (a cancelled row is neither).
func (r *Row) ok() bool     { return r.Status == StatusOK }
func (r *Row) failed() bool { return r.Status != StatusOK && r.Status != StatusCancelled }

// WriteFile writes res as indented JSON to path.
func (res *Result) WriteFile(path string) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	b = append(b, '\n')
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write result: %w", err)
	}
	return nil
}

// ReadFile reads a result file.
func ReadFile(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read result: %w", err)
	}
	res, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("read result %s: %w", path, err)
	}
	return res, nil
}

// Decode parses a result file's bytes. Unknown fields are errors, so
// that a file of another format is not half-read.
func Decode(b []byte) (*Result, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var res Result
	if err := dec.Decode(&res); err != nil {
		return nil, fmt.Errorf("not a %s result: %w", Format, err)
	}
	if dec.More() {
		return nil, errors.New("trailing data after the result object")
	}
	if res.Format != Format {
		return nil, fmt.Errorf("format %q, want %q", res.Format, Format)
	}
	return &res, nil
}

// csvColumns are the columns of WriteCSV, in order.
var csvColumns = []string{"run", "index", "status", "phase", "http_status", "error_code", "terminal", "finish_reason",
	"attempts", "request_id", "start_ms", "due_ms", "sched_lag_ms", "write_ms", "conn_reused",
	"time_to_headers_ms", "first_sse_event_ms", "first_response_ms", "first_text_delta_ms", "end_to_end_ms",
	"visible_output_tps", "inter_token_latency_ms",
	"prompt_tokens", "input_tokens", "output_tokens", "reasoning_tokens", "visible_tokens", "tokens_source",
	"events_heartbeat", "events_metadata", "events_reasoning", "events_tool", "events_text", "events_done",
	"events_error", "events_unknown", "bytes",
	"gw_status", "gw_first_text_delta_ms", "gw_first_text_sent_ms", "gw_total_handler_ms",
	"split_first_text_network_client_ms", "split_first_text_gateway_ms", "split_first_text_upstream_ms",
	"split_end_network_client_ms", "split_end_gateway_ms", "split_end_upstream_ms"}

// WriteCSV writes the rows as CSV with a header line. Absent values are
// empty cells, never 0.
func WriteCSV(w io.Writer, rows []Row) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvColumns); err != nil {
		return err
	}
	off := func(o timeline.Offset) string {
		if v, ok := o.Ms(); ok {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
	span := func(s timeline.Span) string {
		if v, ok := s.Ms(); ok {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return ""
	}
	num := func(p *int) string {
		if p == nil {
			return ""
		}
		return strconv.Itoa(*p)
	}
	for i := range rows {
		r := &rows[i]
		tps := ""
		if v, ok := r.VisibleOutputTPS.Get(); ok {
			tps = strconv.FormatFloat(v, 'f', -1, 64)
		}
		e := r.Events
		rec := []string{r.Run, strconv.Itoa(r.Index), r.Status, r.Phase, strconv.Itoa(r.HTTPStatus), r.ErrorCode,
			r.Terminal, r.FinishReason, strconv.Itoa(r.Attempts), r.RequestID,
			off(r.StartMs), off(r.DueMs), span(r.SchedLagMs), span(r.WriteMs), strconv.FormatBool(r.ConnReused),
			off(r.TimeToHeadersMs), off(r.FirstSSEEventMs), off(r.FirstResponseMs), off(r.FirstTextDeltaMs), off(r.EndToEndMs),
			tps, span(r.InterTokenLatencyMs),
			strconv.Itoa(r.Tokens.Prompt), num(r.Tokens.Input), num(r.Tokens.Output), num(r.Tokens.Reasoning), num(r.Tokens.Visible), r.Tokens.Source,
			strconv.Itoa(e.Heartbeat), strconv.Itoa(e.Metadata), strconv.Itoa(e.Reasoning), strconv.Itoa(e.Tool),
			strconv.Itoa(e.Text), strconv.Itoa(e.Done), strconv.Itoa(e.Error), strconv.Itoa(e.Unknown),
			strconv.FormatInt(r.Bytes, 10)}
		gw := make([]string, 10)
		if g := r.Gateway; g != nil && g.Record != nil {
			gw[0] = g.Record.Status
			gw[1], gw[2], gw[3] = off(g.Record.FirstTextDeltaMs), off(g.Record.FirstTextSentMs), off(g.Record.TotalHandlerMs)
			if s, ok := g.Split[MetricFirstText]; ok {
				gw[4], gw[5], gw[6] = span(s.NetworkClientMs), span(s.GatewayMs), span(s.UpstreamMs)
			}
			if s, ok := g.Split[MetricEndToEnd]; ok {
				gw[7], gw[8], gw[9] = span(s.NetworkClientMs), span(s.GatewayMs), span(s.UpstreamMs)
			}
		}
		if err := cw.Write(append(rec, gw...)); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
