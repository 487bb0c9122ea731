package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// setupTelemetry adds /metrics, the OpenTelemetry export and the request
// log to the gateway (issue 8). It runs before the relay is built: a
// recorder appended to s.recorders receives every finished record; the
// gateway's inflight count is s.gw.Inflight() once serving.
//
// Prometheus observation runs on the request's goroutine (it is a few
// atomic adds); the request log and the OTLP export go through a
// telemetry.Queue, so a slow log pipe or collector never holds a client.
func (s *Server) setupTelemetry(mux *http.ServeMux) error {
	key := s.cfg.Metrics.Key
	models := telemetry.NewModels(exactModels(s), s.cfg.Metrics.MaxModels)

	sink := &telemetrySink{}
	next := []telemetry.Recorder{telemetry.NewRequestLog(s.log)}
	if ep := s.cfg.Telemetry.OTLPEndpoint; ep != "" {
		o, err := telemetry.NewOTel(context.Background(), telemetry.OTelOptions{
			Endpoint:  ep,
			Interval:  s.cfg.Telemetry.Interval.D(),
			Upstreams: upstreams(s),
			Models:    models,
		})
		if err != nil {
			return err
		}
		sink.otel = o
		next = append(next, o)
	}
	sink.queue = telemetry.NewQueue(0, next...)

	writer := s.writer // fixed for the server's life; closeAll clears the field
	m := telemetry.NewMetrics(telemetry.MetricsOptions{
		Models: models,
		// s.gw is built after this function returns and before serving;
		// the gauges are read only when /metrics is scraped.
		Inflight: func() int64 {
			if s.gw == nil {
				return 0
			}
			return s.gw.Inflight()
		},
		Channels: func() []telemetry.ChannelInflight {
			chans := s.router.Channels()
			out := make([]telemetry.ChannelInflight, len(chans))
			for i, c := range chans {
				out[i] = telemetry.ChannelInflight{Name: c.Name, Inflight: c.Inflight()}
			}
			return out
		},
		Store: func() telemetry.StoreStats {
			if writer == nil {
				return telemetry.StoreStats{}
			}
			st := writer.Stats()
			return telemetry.StoreStats{Queued: st.Queued, Dropped: st.Dropped, Rejected: st.Rejected, Written: st.Written}
		},
		Dropped: sink.queue.Dropped,
		AuthFailures: func() uint64 {
			if s.gw == nil {
				return 0
			}
			return s.gw.AuthFailures()
		},
		Runtime: true,
	})
	mux.Handle("GET /metrics", m.Handler(key))
	if key == "" {
		// The histograms carry group labels: say so once, at start.
		s.log.Info("metrics: /metrics is readable without a key; set metrics.key_env to protect it")
	}
	// Metrics first: /metrics counts a request before its log line is out.
	s.recorders = append(s.recorders, m, sink)
	return nil
}

// telemetrySink is the queued part of the telemetry, kept among the
// recorders so that closeTelemetry can find it.
type telemetrySink struct {
	queue *telemetry.Queue
	otel  *telemetry.OTel // nil when the OTLP export is off
}

func (t *telemetrySink) Record(rec record.Record) { t.queue.Record(rec) }

// closeTelemetry drains the telemetry queue and flushes the OTLP export.
// Call it after the HTTP server has drained (so the last streams' records
// are in the queue) and before the process exits.
func (s *Server) closeTelemetry(ctx context.Context) error {
	var errs []error
	for _, r := range s.recorders {
		t, ok := r.(*telemetrySink)
		if !ok {
			continue
		}
		if err := t.queue.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("drain telemetry queue: %w", err))
		}
		if t.otel != nil {
			if err := t.otel.Shutdown(ctx); err != nil {
				errs = append(errs, fmt.Errorf("otlp export: %w", err))
			}
		}
	}
	return errors.Join(errs...)
}

// exactModels returns the model names the channels list without glob
// characters: the operator chose them, so they always keep their label.
func exactModels(s *Server) []string {
	var out []string
	for _, c := range s.cfg.Channels {
		for _, m := range c.Models {
			if !strings.ContainsAny(m, `*?[\`) {
				out = append(out, m)
			}
		}
	}
	return out
}

// upstreams returns each channel's upstream host and port, for the OTel
// server.address and server.port attributes.
func upstreams(s *Server) map[string]telemetry.Upstream {
	out := map[string]telemetry.Upstream{}
	for _, c := range s.router.Channels() {
		port, err := strconv.Atoi(c.BaseURL.Port())
		if err != nil {
			port = 80
			if c.BaseURL.Scheme == "https" {
				port = 443
			}
		}
		out[c.Name] = telemetry.Upstream{Address: c.BaseURL.Hostname(), Port: port}
	}
	return out
}
