package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/telemetry"
	"github.com/ttfx/ttfx/internal/wire"
)

// setupTelemetry adds /metrics, the OpenTelemetry export and the request
// log to the gateway (issue 8). It runs before the relay is built: a
// recorder appended to s.recorders receives every finished record; the
// gateway's inflight count is s.gw.Inflight() once serving.
//
// Prometheus observation runs on the request's goroutine (it is a few
// atomic adds); the request log and the OTLP export go through a
// telemetry.Queue, so a slow log pipe or collector never holds a client.
func (s *Server) setupTelemetry(mux *http.ServeMux, listen string) error {
	models := telemetry.NewModels(configuredModels(s.cfg), s.cfg.Metrics.MaxModels)
	s.models = models

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
		// Spans are exported: join each request to its caller's trace
		// and pass the gateway's span on upstream (issue 17).
		s.tracer = telemetry.Tracing{}
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
			return telemetry.StoreStats{Queued: st.Queued, Capacity: writer.Capacity(), Dropped: st.Dropped, Rejected: st.Rejected, Written: st.Written}
		},
		Dropped: sink.queue.Dropped,
		AuthFailures: func() uint64 {
			if s.gw == nil {
				return 0
			}
			return s.gw.AuthFailures()
		},
		BodyBudget: func() telemetry.BodyBudget {
			if s.gw == nil {
				return telemetry.BodyBudget{}
			}
			b := s.gw.BodyBudget()
			return telemetry.BodyBudget{Budget: b.Budget, InUse: b.InUse, Refused: b.Refused}
		},
		AuthFailuresUnrecorded: func() uint64 {
			if s.gw == nil {
				return 0
			}
			return s.gw.AuthFailuresUnrecorded()
		},
		Runtime: true,
	})
	m.RegisterRouting(s.routingStats)
	if s.limiter != nil {
		m.RegisterAdmission(admissionStats(s.limiter))
	}
	m.RegisterReloads(s.ReloadStats)
	mux.Handle("GET /metrics", m.AuthHandler(s.metricsAuth(listen)))
	// Metrics first: /metrics counts a request before its log line is out.
	s.recorders = append(s.recorders, m, sink)
	return nil
}

// metricsAuth decides who may read /metrics (issue 18): the histograms
// carry every group's and model's names. With metrics.key_env set, that
// key alone. Without it, a listener reachable from other hosts takes an
// admin key, unless metrics.public opens it on purpose; on loopback
// (zero-config's 127.0.0.1:8080) it stays open, since only this host can
// reach it. The choice is logged once, at start. nil means open.
func (s *Server) metricsAuth(listen string) func(token string) bool {
	if key := s.cfg.Metrics.Key; key != "" {
		s.log.Info("metrics: /metrics requires the key of metrics.key_env")
		return telemetry.KeyAuth(key)
	}
	switch {
	case loopback(listen):
		s.log.Info("metrics: /metrics is open on this loopback listener " + listen + "; set metrics.key_env to require a key")
		return nil
	case s.cfg.Metrics.Public:
		s.log.Warn("metrics: /metrics is open to every host that reaches " + listen + " (metrics.public: true); it names every group and model")
		return nil
	}
	s.log.Info("metrics: /metrics on " + listen + " requires an admin key (Authorization: Bearer); set metrics.key_env for a scrape key of its own, or metrics.public: true to open it")
	return func(token string) bool {
		p, ok := s.keys.Lookup(token)
		return ok && p.Role == auth.RoleAdmin
	}
}

// loopback reports whether a listen address ("host:port") binds loopback
// only: 127.0.0.0/8, ::1 or localhost. An empty host binds every interface.
func loopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// telemetrySink is the queued part of the telemetry, kept among the
// recorders so that closeTelemetry can find it.
type telemetrySink struct {
	queue *telemetry.Queue
	otel  *telemetry.OTel // nil when the OTLP export is off
}

func (t *telemetrySink) Record(rec *record.Record) { t.queue.Record(rec) }

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
		up := telemetry.Upstream{Address: c.BaseURL.Hostname(), Port: port}
		if k := wire.LookupKind(c.Protocol); k != nil {
			up.Provider = k.GenAIProvider
		}
		out[c.Name] = up
	}
	return out
}
