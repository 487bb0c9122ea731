package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"

	"github.com/ttfx/ttfx/internal/record"
)

// NewLogger builds the gateway's structured logger: format "json" or
// "text" (default), level "debug", "info" (default), "warn" or "error"
// (config.Log). An unknown format or level is an error, so a typo in the
// configuration does not silently change what is logged.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	l, _, err := NewLoggerVar(w, format, level)
	return l, err
}

// NewLoggerVar is NewLogger with the level in a LevelVar, for a
// configuration reload to change.
func NewLoggerVar(w io.Writer, format, level string) (*slog.Logger, *slog.LevelVar, error) {
	lv := new(slog.LevelVar)
	if level != "" {
		if err := lv.UnmarshalText([]byte(level)); err != nil {
			return nil, nil, fmt.Errorf("log.level: %q is not debug, info, warn or error", level)
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), lv, nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), lv, nil
	}
	return nil, nil, fmt.Errorf("log.format: %q is not text or json", format)
}

// RequestLog writes one log line per finished request: its id, status,
// routing, the key timing fields and the primary verdict. It never logs
// content or keys — a record holds neither (package record) — and it
// leaves out the client-sent user hash. Status ok logs at Info, every
// other status at Warn. Give it to a Queue: a log handler writes
// synchronously.
type RequestLog struct {
	log *slog.Logger
}

// NewRequestLog returns a RequestLog writing to l.
func NewRequestLog(l *slog.Logger) *RequestLog { return &RequestLog{log: l} }

// maxLogModel bounds the model name in a log line: it comes from the
// client, and a line should stay a line.
const maxLogModel = 128

// Record logs rec.
func (l *RequestLog) Record(rec *record.Record) {
	level := slog.LevelInfo
	if rec.Status != record.StatusOK {
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 28)
	attrs = append(attrs,
		slog.String("request_id", rec.RequestID),
		slog.String("status", rec.Status),
		slog.Int("http_status", rec.HTTPStatus),
		slog.String("api", rec.API),
		slog.String("model", clip(rec.Model, maxLogModel)),
		slog.String("channel", rec.Channel),
		slog.String("group", rec.Group),
		slog.String("key_name", rec.KeyName),
		slog.Bool("stream", rec.Stream),
		slog.Int("attempts", len(rec.Attempts)),
	)
	// Absent fields are left out: a missing key in a log line reads as
	// "did not happen", a 0 would read as "instant".
	f := &rec.Fields
	for _, x := range [...]struct {
		name string
		v    interface{ Ms() (float64, bool) }
	}{
		{"upstream_headers_ms", f.UpstreamHeadersMs},
		{"first_sse_event_ms", f.FirstSSEEventMs},
		{"first_response_ms", f.FirstResponseMs},
		{"first_text_delta_ms", f.FirstTextDeltaMs},
		{"upstream_done_ms", f.UpstreamDoneMs},
		{"total_handler_ms", f.TotalHandlerMs},
		{"local_ms", f.LocalMs()},
	} {
		if v, ok := x.v.Ms(); ok {
			attrs = append(attrs, slog.Float64(x.name, roundMicro(v)))
		}
	}
	if v, ok := rec.VisibleOutputTPS.Get(); ok {
		attrs = append(attrs, slog.Float64("visible_output_tps", math.Round(v*100)/100))
	}
	if rec.Tokens.Output != nil {
		attrs = append(attrs, slog.Int("output_tokens", *rec.Tokens.Output))
	}
	if rec.Tokens.Visible != nil {
		attrs = append(attrs, slog.Int("visible_tokens", *rec.Tokens.Visible), slog.String("tokens_source", rec.Tokens.Source))
	}
	if len(rec.Diagnosis) > 0 {
		attrs = append(attrs, slog.String("verdict", rec.Diagnosis[0]), slog.String("diagnosis", strings.Join(rec.Diagnosis, ",")))
	}
	if rec.Error != "" {
		attrs = append(attrs, slog.String("error", rec.Error))
	}
	l.log.LogAttrs(ctx, level, "request", attrs...)
}

// roundMicro rounds milliseconds to the microsecond: enough for a log
// line, and the store keeps the nanoseconds.
func roundMicro(ms float64) float64 { return math.Round(ms*1000) / 1000 }

// clip returns s cut to at most n bytes on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
