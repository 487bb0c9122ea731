// Package server wires the gateway together: configuration, keys, the
// store and its writer, the channels (with an in-process simulator for the
// zero-config gateway), the relay, the read API, metrics and the dashboard.
// `ttfx serve`, `ttfx demo` and the end-to-end tests all start it.
package server

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/ttfx/ttfx/internal/admission"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/ttfx/ttfx/internal/store/chstore"  // registers ClickHouse
	_ "github.com/ttfx/ttfx/internal/store/sqlstore" // registers SQLite and PostgreSQL

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/diagnose"
	_ "github.com/ttfx/ttfx/internal/provider/all" // the provider units
	"github.com/ttfx/ttfx/internal/relay"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/telemetry"
	"github.com/ttfx/ttfx/internal/timeline"
	"github.com/ttfx/ttfx/internal/wire"
)

// Options configure a Server.
type Options struct {
	// Config is the configuration; nil means the zero-config gateway:
	// 127.0.0.1:8080, SQLite ttfx.db, generated keys, and an in-process
	// simulator channel for each protocol.
	Config *config.Config
	// Dir is where the zero-config gateway keeps ttfx.db and its keys
	// file; empty means the working directory.
	Dir string
	// Listen overrides the configured address (tests pass 127.0.0.1:0).
	Listen string
	// SimProfiles are the simulator's profiles (zero-config only); nil
	// means the built-ins.
	SimProfiles map[string]sim.Profile
	// ExtraKeys are made in the store on this start, each replacing a live
	// key of its name (the demo's keys).
	ExtraKeys []Generated
	// KeyPoll is how often the stored keys are read again; 0 means
	// DefaultKeyPoll.
	KeyPoll time.Duration
	// Now is the clock of the timeline; nil means time.Now.
	Now    timeline.Clock
	Logger *slog.Logger
	// ConfigPath is the file Config was read from: Reload reads it again.
	// Empty: the configuration cannot be reloaded.
	ConfigPath string
	// Getenv resolves key_env at each reload; nil means os.Getenv.
	Getenv func(string) string
	// LogLevel, if set, is the level of Logger's handler: a reload sets it
	// from log.level.
	LogLevel *slog.LevelVar
	// Replica names this gateway to the others sharing its store (GET
	// /api/channels says which replicas applied an operator's state);
	// empty means the host name and the listening port.
	Replica string
	// WatchInterval is how often ConfigPath and its key files are checked
	// for a change (and reloaded when changed); 0 means
	// DefaultWatchInterval, negative means no watching.
	WatchInterval time.Duration
}

// Server is a running gateway.
type Server struct {
	cfg   *config.Config                // as started: the settings a reload does not change
	cur   atomic.Pointer[config.Config] // in use: the last one loaded
	kinds kindStates                    // the channels' kind state (credentials), kept across reloads
	// Reloading (reload.go).
	cfgPath       string
	getenv        func(string) string
	logLevel      *slog.LevelVar
	models        *telemetry.Models
	reloadMu      sync.Mutex // one reload at a time
	appliedGen    atomic.Uint64
	reloadStatsMu sync.Mutex
	reloadStats   telemetry.ReloadStats
	lastReload    *ReloadResult
	// keysMu guards configEntries and storedRows, which a reload and the
	// key poll each combine into the keyring.
	keysMu     sync.Mutex
	storedRows []store.KeyRow
	// replica names this gateway among those sharing its store; acks are
	// the operator states it applied (replicas.go).
	replica string
	acks    localAcks
	log     *slog.Logger
	gw      *relay.Gateway
	store   store.Store
	writer  *store.Writer
	rules   *diagnose.Rules
	keys    *auth.Keyring // the configuration's keys and the store's live ones, reloaded by pollKeys
	// configEntries are the configuration file's keys.
	configEntries []auth.Entry
	// storedKeys names the store's live keys at start.
	storedKeys []string
	generated  []Generated
	router     *route.Router
	limiter    *admission.Limiter // nil without limits
	api        *api.Handler
	recorders  relay.Recorders // every finished record goes to each, in order

	// tracer joins requests to their callers' traces; nil when spans
	// are not exported.
	tracer relay.Tracer

	ln   net.Listener
	http *http.Server
	// certs serves the listener's certificate when TLS is configured.
	certs *certFiles

	simLn   net.Listener
	simHTTP *http.Server
	sim     *sim.Server

	stopRetention context.CancelFunc
	retentionDone chan struct{}

	shutdownOnce sync.Once
	shutdownErr  error
}

// New builds a server and opens its listener; Serve starts serving.
func New(ctx context.Context, opts Options) (_ *Server, err error) {
	s := &Server{log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	defer func() {
		if err != nil {
			s.closeAll()
		}
	}()
	zero := opts.Config == nil
	cfg := opts.Config
	if zero {
		cfg, _ = config.Parse(nil, nil)
		cfg.Store = "sqlite:" + filepath.Join(opts.Dir, "ttfx.db")
	}
	s.cfg = cfg
	s.cur.Store(cfg)
	s.cfgPath, s.getenv, s.logLevel = opts.ConfigPath, opts.Getenv, opts.LogLevel
	if s.getenv == nil {
		s.getenv = os.Getenv
	}
	s.reloadStats.LastOK = float64(time.Now().UnixNano()) / 1e9

	// The port first: a start that cannot listen (a busy port) must leave
	// nothing behind, no database and no keys whose secrets nobody saw.
	addr := cfg.Listen
	if opts.Listen != "" {
		addr = opts.Listen
	}
	if cfg.TLS.Enabled() {
		// Before the port too: a certificate that does not load must
		// not leave a listener that cannot serve.
		if s.certs, err = newCertFiles(cfg.TLS, s.log); err != nil {
			return nil, err
		}
	}
	s.ln, err = net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, fmt.Errorf("listen: %w\nanother program (perhaps another ttfx) already listens on %s: stop it, or listen elsewhere with --listen 127.0.0.1:8081 (or listen: in the configuration)", err, addr)
		}
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.replica = opts.Replica
	if s.replica == "" {
		host, _ := os.Hostname()
		_, port, _ := net.SplitHostPort(s.ln.Addr().String())
		s.replica = host + ":" + port
	}

	var userKey []byte
	var legacy []store.KeyRow
	if zero {
		if opts.Dir != "" {
			if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
				return nil, fmt.Errorf("store directory: %w", err)
			}
		}
		var ok bool
		legacy, userKey, ok, err = readLegacyKeys(filepath.Join(opts.Dir, "ttfx.keys.json"))
		if err != nil {
			return nil, err
		}
		if !ok {
			if userKey, err = loadOrCreateSecret(filepath.Join(opts.Dir, "ttfx.db.userkey")); err != nil {
				return nil, err
			}
		}
		if err := s.startSim(opts.SimProfiles); err != nil {
			return nil, err
		}
		cfg.Channels = s.simChannels()
	} else {
		if userKey, err = userHashKey(cfg, s.log); err != nil {
			return nil, err
		}
	}
	if s.configEntries, err = configKeys(cfg.Keys); err != nil {
		return nil, err
	}

	// A database that cannot be reached now does not stop the gateway:
	// it relays, queues records, and connects in the background.
	s.store, err = store.OpenOrRetry(ctx, cfg.Store, s.log)
	if err != nil {
		return nil, err
	}
	ks, err := keyStore(s.store)
	if err != nil {
		return nil, err
	}
	if len(legacy) > 0 {
		if _, err := ks.ChangeKeys(ctx, store.KeyChange{Add: legacy, OnlyIfEmpty: true}); err != nil {
			return nil, fmt.Errorf("import ttfx.keys.json: %w", err)
		}
	}
	if s.generated, err = makeKeys(ctx, ks, zero, opts.ExtraKeys); err != nil {
		return nil, err
	}
	rows, err := ks.ListKeys(ctx)
	if errors.Is(err, store.ErrUnavailable) {
		// The database is not there yet: the configuration's keys work
		// now, the stored ones from the first poll that reaches it.
		s.log.Warn("keys: the store cannot be read yet; serving with the configuration's keys until it can")
		rows, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	var entries []auth.Entry
	s.storedRows = rows
	entries, s.storedKeys = keyEntries(s.configEntries, rows, time.Now())
	s.keys = auth.NewKeyring(entries)

	// The writer holds its transactions back while the gateway sets
	// requests up (relay.Starting).
	starting := new(relay.Starting)
	s.writer = store.NewWriter(s.store, store.WriterOptions{Log: s.log, Busy: starting.Busy})
	s.rules = diagnose.New(cfg.Diagnosis)

	chans, err := buildChannels(cfg.Channels, &s.kinds)
	if err != nil {
		return nil, err
	}
	s.router = route.New(chans, route.Options{Routes: buildRoutes(cfg.Routes), Seed: randSeed(), Now: opts.Now})

	limiter, err := buildLimiter(cfg.Limits, s.log)
	if err != nil {
		return nil, err
	}
	s.limiter = limiter

	mux := http.NewServeMux()
	s.recorders = relay.Recorders{s.writer}
	if err := s.setupTelemetry(mux, addr); err != nil {
		return nil, err
	}
	s.gw = relay.New(relay.Options{
		Router:                s.router,
		Keys:                  s.keys,
		Recorder:              s.recorders,
		Diagnose:              s.rules.Diagnose,
		Now:                   opts.Now,
		MaxBodyBytes:          cfg.MaxBodyBytes,
		BodyBudget:            cfg.BodyBudgetBytes,
		BodyBudgetPerKey:      cfg.BodyBudgetPerKeyBytes,
		BodyReadTimeout:       cfg.BodyReadTimeout.D(),
		UpstreamIdleTimeout:   cfg.UpstreamIdleTimeout.D(),
		UserHashKey:           userKey,
		MaxAuthFailures:       cfg.AuthFailuresPerMinute,
		MaxAuthFailureRecords: cfg.AuthFailureRecordsPerMinute,
		Logger:                s.log,
		Tracer:                s.tracer,
		Starting:              starting,
		Admission:             s.limiter,
	})
	s.gw.Register(mux)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok\n"))
	})
	s.api = api.New(api.Options{Store: s.store, Writer: s.writer, Resolve: api.KeyringResolver(s.keys), Log: s.log,
		Timeout: cfg.ReadTimeout.D(), Concurrency: cfg.ReadConcurrency, MaxAnswerValues: cfg.MaxAnswerValues,
		ReadShare: cfg.ReadCPUShare})
	s.api.Register(mux)
	s.registerDiagnosis(mux)
	s.registerChannelHealth(mux)
	s.registerReload(mux)
	s.registerChannels(mux)
	if err := s.setupWeb(mux); err != nil {
		return nil, err
	}

	s.http = &http.Server{
		Handler:           withRequestID(mux),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnContext:       relay.ConnContext,
	}
	if s.certs != nil {
		s.http.TLSConfig = s.certs.config()
	}
	// Each request's wait before its handler ran (request_wait_ms).
	s.ln = relay.TimeConns(s.http, s.ln)
	rctx, cancel := context.WithCancel(context.Background())
	s.stopRetention, s.retentionDone = cancel, make(chan struct{})
	var maintenance sync.WaitGroup
	maintenance.Go(func() { store.RunRetention(rctx, s.store, cfg.Retention.D(), time.Hour, time.Now, s.log) })
	// Hour and day rollups from the minute ones, so that long summaries
	// read few rows (several gateways may do it at once).
	maintenance.Go(func() { store.RunCompaction(rctx, s.store, time.Minute, time.Now, s.log) })
	poll := opts.KeyPoll
	if poll <= 0 {
		poll = DefaultKeyPoll
	}
	maintenance.Go(func() { s.pollKeys(rctx, ks, poll) })
	if cs := s.channelStates(); cs != nil {
		// The states operators set before this start (or on another
		// replica) apply before the first request when the store answers.
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := s.applyChannelStates(sctx, cs); err != nil {
			s.log.Warn("channel states: the store cannot be read yet; applying them from the first poll that reaches it", "err", err)
		}
		cancel()
		maintenance.Go(func() { s.pollChannelStates(rctx, cs, poll) })
	}
	if s.cfgPath != "" && opts.WatchInterval >= 0 {
		every := opts.WatchInterval
		if every == 0 {
			every = DefaultWatchInterval
		}
		maintenance.Go(func() { s.watchConfig(rctx, every) })
	}
	go func() {
		maintenance.Wait()
		close(s.retentionDone)
	}()
	return s, nil
}

// Addr returns the address the gateway listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the gateway's base URL.
func (s *Server) URL() string {
	if s.certs != nil {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
}

// Generated returns the keys made on this start (the zero-config gateway's
// first keys and Options.ExtraKeys), whose secrets are shown once.
func (s *Server) Generated() []Generated { return s.generated }

// StoredKeys names the store's keys that were live at start.
func (s *Server) StoredKeys() []string { return s.storedKeys }

// StoreDSN returns the store the gateway uses, its password hidden.
func (s *Server) StoreDSN() string { return store.RedactDSN(s.cfg.Store) }

// Store returns the server's store.
func (s *Server) Store() store.Store { return s.store }

// Writer returns the server's record writer.
func (s *Server) Writer() *store.Writer { return s.writer }

// Rules returns the diagnosis rules.
func (s *Server) Rules() *diagnose.Rules { return s.rules }

// SimURL returns the in-process simulator's base URL, or "".
func (s *Server) SimURL() string {
	if s.simLn == nil {
		return ""
	}
	return "http://" + s.simLn.Addr().String()
}

// Sim returns the in-process simulator, or nil.
func (s *Server) Sim() *sim.Server { return s.sim }

// Serve serves until ctx is cancelled, then shuts down gracefully: stop
// accepting, let in-flight streams finish (bounded by the drain timeout),
// then drain the record queue.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() {
		if s.certs != nil {
			// The certificate comes from TLSConfig.GetCertificate;
			// ServeTLS adds HTTP/2 to the listener.
			errc <- s.http.ServeTLS(s.ln, "", "")
			return
		}
		errc <- s.http.Serve(s.ln)
	}()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	return errors.Join(serveErr, s.Shutdown())
}

// DrainTimeout is how long Shutdown lets streams in flight finish.
func (s *Server) DrainTimeout() time.Duration { return s.cfg.DrainTimeout.D() }

// Shutdown stops the server gracefully.
func (s *Server) Shutdown() error {
	// Serve (on its context) and a caller may both shut down: the work is
	// done once, and every caller gets its result.
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown() })
	return s.shutdownErr
}

func (s *Server) shutdown() error {
	drain := s.cfg.DrainTimeout.D()
	if c := s.cur.Load(); c != nil {
		drain = c.DrainTimeout.D()
	}
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	var errs []error
	if err := s.http.Shutdown(ctx); err != nil {
		// Streams still running past the drain timeout are ended: each
		// closes with its protocol's error event and is recorded before
		// the record queue closes.
		s.gw.Abort()
		for deadline := time.Now().Add(5 * time.Second); s.gw.Inflight() > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		s.http.Close()
		errs = append(errs, fmt.Errorf("drain: %w", err))
	}
	s.closeAll()
	return errors.Join(errs...)
}

func (s *Server) closeAll() {
	if s.limiter != nil {
		// The relay is done: the last releases reach Redis, and the
		// heartbeat stops.
		s.limiter.Close()
		s.limiter = nil
	}
	if s.stopRetention != nil {
		s.stopRetention()
		<-s.retentionDone
		s.stopRetention = nil
	}
	// The relay is done: flush the request log and the OTLP export, then
	// drain the record queue.
	if s.recorders != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.closeTelemetry(ctx); err != nil {
			s.log.Error("close telemetry", "err", err)
		}
		cancel()
		s.recorders = nil
	}
	if s.writer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.writer.Close(ctx); err != nil {
			s.log.Error("drain record queue", "err", err)
		}
		cancel()
		s.writer = nil
	}
	if s.store != nil {
		s.store.Close()
		s.store = nil
	}
	if s.simHTTP != nil {
		s.simHTTP.Close()
		s.simHTTP = nil
	}
	if s.ln != nil && s.http == nil {
		s.ln.Close()
	}
}

// startSim starts the in-process simulator on a loopback port: the gateway
// reaches it over real HTTP, as it would a provider.
func (s *Server) startSim(profiles map[string]sim.Profile) error {
	if profiles == nil {
		profiles = sim.Builtin()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("simulator listen: %w", err)
	}
	s.sim = sim.New(sim.Options{Profiles: profiles, Logger: s.log})
	s.simLn = ln
	s.simHTTP = &http.Server{Handler: s.sim, ReadHeaderTimeout: 10 * time.Second}
	go s.simHTTP.Serve(ln)
	return nil
}

// simChannels are the zero-config channels: one per provider kind that
// asks for one, all models, each serving only the family its kind is
// named for (Anthropic clients reach sim-anthropic, never the bedrock
// kind's InvokeModel).
func (s *Server) simChannels() []config.Channel {
	base := s.SimURL()
	var out []config.Channel
	for _, k := range wire.Kinds() {
		if !k.ZeroConfig {
			continue
		}
		p := k.Name
		out = append(out, config.Channel{
			Name: "sim-" + p, Protocol: p, Families: []string{p}, BaseURL: base, Region: "local", Weight: 1,
			Timeouts: config.DefaultTimeouts, Secret: "sim-key",
		})
	}
	return out
}

// buildChannels turns the configured channels into routing channels.
// Their kinds' Upstreams come from ups (opened for new configurations,
// kept for unchanged ones); ups keeps only the latest set once all opened.
func buildChannels(cs []config.Channel, ups *kindStates) ([]*route.Channel, error) {
	var out []*route.Channel
	keep := map[string]*wire.Upstream{}
	for _, c := range cs {
		u, err := url.Parse(c.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("channel %q: %w", c.Name, err)
		}
		up, err := ups.get(c, u, keep)
		if err != nil {
			return nil, err
		}
		provider := u.Hostname()
		if strings.HasPrefix(c.Name, "sim-") && (provider == "127.0.0.1" || provider == "localhost") {
			provider = "sim"
		}
		t := c.Timeouts.WithDefaults()
		out = append(out, &route.Channel{
			Name: c.Name, Protocol: c.Protocol, Families: c.Families, BaseURL: u, Key: c.Secret,
			Models: c.Models.Patterns, Upstream: c.Models.Upstream, Groups: c.Groups, Region: c.Region, Provider: provider,
			Priority: c.Priority, Weight: max(c.Weight, 1), NoStreamUsage: c.StreamUsage != nil && !*c.StreamUsage, Hooks: up,
			Timeouts: route.Timeouts{Headers: t.Headers.D(), FirstOutput: t.FirstOutput.D(), Idle: t.Idle.D(), Total: t.Total.D()},
		})
	}
	ups.swap(keep)
	return out, nil
}

// userHashKey returns the key of the hash of client-sent user ids: the
// configured one, or one kept beside a SQLite store (made on first start),
// so that the same user hashes alike across restarts. With PostgreSQL and no
// configured key each replica has its own random key, and says so.
func userHashKey(cfg *config.Config, log *slog.Logger) ([]byte, error) {
	if cfg.UserHashKey != "" {
		return []byte(cfg.UserHashKey), nil
	}
	if file, ok := strings.CutPrefix(cfg.Store, "sqlite:"); ok {
		return loadOrCreateSecret(file + ".userkey")
	}
	log.Warn("user_hash_key_env is not set: user ids are hashed with a random key of this process, so hashes differ across replicas and restarts")
	k := make([]byte, 32)
	rand.Read(k)
	return k, nil
}

// withRequestID gives every response an X-Request-Id (SPEC.md §5); the
// relay replaces it with the id of the request's record.
func withRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", relay.NewRequestID())
		h.ServeHTTP(w, r)
	})
}

func randSeed() uint64 {
	var b [8]byte
	rand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}
