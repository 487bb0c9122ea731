package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/telemetry"
)

// Reloading the configuration (issue 48). A reload reads and checks the
// whole file — secrets from key_env and key_file included — before it
// changes anything; an invalid file changes nothing. A valid one is applied
// in this order, each part with one atomic store: the diagnosis thresholds,
// the configuration's keys, the log level, the metrics limits, and last the
// router's table of channels and routes. A request loads the router's table
// once, when it is planned, so it finishes on the channels it started with;
// every request planned after the swap uses the new ones.

// ReloadResult is what a reload did, as POST /api/admin/reload answers it
// and the log says it.
type ReloadResult struct {
	OK      bool      `json:"ok"`
	Trigger string    `json:"trigger"`      // sighup | file | api
	By      string    `json:"by,omitempty"` // the key that asked (api)
	At      time.Time `json:"at"`
	// Errors are the invalid file's errors, as `ttfx serve` gives them at
	// start (line, field, suggestion); nothing changed.
	Errors []string `json:"errors,omitempty"`
	// Changed names what the reload changed ("channels: added eu, key of
	// us"); empty when the file held nothing new.
	Changed []string `json:"changed"`
	// NeedsRestart names the changed settings a reload does not apply
	// (listen, store, …): the gateway keeps the values it started with.
	NeedsRestart []string `json:"needs_restart,omitempty"`
	Warnings     []string `json:"warnings,omitempty"`
}

// Reload triggers.
const (
	TriggerSignal = "sighup"
	TriggerFile   = "file"
	TriggerAPI    = "api"
)

// DefaultWatchInterval is how often the configuration file (and the key
// files it names) is checked for a change.
const DefaultWatchInterval = time.Second

// Reload reads the configuration file again and applies it when valid.
// Reloads are serialised; by names the key that asked, if any.
func (s *Server) Reload(ctx context.Context, trigger, by string) ReloadResult {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	res := ReloadResult{Trigger: trigger, By: by, At: time.Now().UTC(), Changed: []string{}}
	if s.cfgPath == "" {
		res.Errors = []string{"this gateway runs without a configuration file (zero-config): there is nothing to reload"}
		s.reloadDone(&res)
		return res
	}
	next, err := config.Load(s.cfgPath, s.getenv)
	if err == nil {
		err = checkReloadable(next)
	}
	var chans []*route.Channel
	if err == nil {
		chans, err = buildChannels(next.Channels, &s.kinds)
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				res.Errors = append(res.Errors, line)
			}
		}
		s.reloadDone(&res)
		return res
	}
	prev := s.cur.Load()
	res.Changed, res.NeedsRestart = diffConfig(s.cfg, prev, next)
	res.Warnings = next.Warnings()

	s.rules.Set(next.Diagnosis)
	if entries, err := configKeys(next.Keys); err == nil {
		s.keysMu.Lock()
		s.configEntries = entries
		all, _ := keyEntries(entries, s.storedRows, time.Now())
		s.keys.Set(all)
		s.keysMu.Unlock()
	}
	if s.logLevel != nil {
		var lv slog.Level
		lv.UnmarshalText([]byte(next.Log.Level)) // checked by checkReloadable
		s.logLevel.Set(lv)
	}
	if s.models != nil {
		s.models.Reconfigure(configuredModels(next), next.Metrics.MaxModels)
	}
	s.router.Swap(chans, buildRoutes(next.Routes))
	s.cur.Store(next)
	s.appliedGen.Add(1)
	res.OK = true
	s.reloadDone(&res)
	return res
}

// checkReloadable checks what config.Load leaves to the start: the log
// level (telemetry.NewLogger checks it there).
func checkReloadable(c *config.Config) error {
	if c.Log.Level != "" {
		var lv slog.Level
		if err := lv.UnmarshalText([]byte(c.Log.Level)); err != nil {
			return fmt.Errorf("log.level: %q is not debug, info, warn or error", c.Log.Level)
		}
	}
	return nil
}

// reloadDone counts, logs and keeps the result.
func (s *Server) reloadDone(res *ReloadResult) {
	s.reloadStatsMu.Lock()
	if res.OK {
		s.reloadStats.OK++
		s.reloadStats.LastOK = float64(res.At.UnixNano()) / 1e9
		s.reloadStats.LastFailed = false
	} else {
		s.reloadStats.Failed++
		s.reloadStats.LastFailed = true
	}
	s.lastReload = res
	s.reloadStatsMu.Unlock()
	attrs := []any{"trigger", res.Trigger}
	if res.By != "" {
		attrs = append(attrs, "key_name", res.By)
	}
	if !res.OK {
		s.log.Error("configuration reload refused; nothing changed:\n"+strings.Join(res.Errors, "\n"), attrs...)
		return
	}
	changed := "nothing"
	if len(res.Changed) > 0 {
		changed = strings.Join(res.Changed, "; ")
	}
	s.log.Info("configuration reloaded", append(attrs, "changed", changed)...)
	for _, r := range res.NeedsRestart {
		s.log.Warn("configuration: "+r+" changed in the file; it takes effect at the next restart", attrs...)
	}
	for _, w := range res.Warnings {
		s.log.Warn(w)
	}
}

// ReloadStats returns the reload counters (the metrics).
func (s *Server) ReloadStats() telemetry.ReloadStats {
	s.reloadStatsMu.Lock()
	defer s.reloadStatsMu.Unlock()
	return s.reloadStats
}

// diffConfig names what differs between the configuration in use (prev)
// and next: changes a reload applies, and changes to settings that only a
// restart applies (compared with start, the values in use).
func diffConfig(start, prev, next *config.Config) (changed, restart []string) {
	var added, removed, mod []string
	old := map[string]config.Channel{}
	for _, c := range prev.Channels {
		old[c.Name] = c
	}
	for _, c := range next.Channels {
		o, ok := old[c.Name]
		if !ok {
			added = append(added, c.Name)
			continue
		}
		delete(old, c.Name)
		if f := channelDiff(o, c); len(f) > 0 {
			mod = append(mod, c.Name+" ("+strings.Join(f, ", ")+")")
		}
	}
	for _, c := range prev.Channels {
		if _, ok := old[c.Name]; ok {
			removed = append(removed, c.Name)
		}
	}
	if len(added) > 0 {
		changed = append(changed, "channels added: "+strings.Join(added, ", "))
	}
	if len(removed) > 0 {
		changed = append(changed, "channels removed: "+strings.Join(removed, ", "))
	}
	if len(mod) > 0 {
		changed = append(changed, "channels changed: "+strings.Join(mod, "; "))
	}
	if !reflect.DeepEqual(prev.Routes, next.Routes) {
		changed = append(changed, "routes")
	}
	if !reflect.DeepEqual(prev.Diagnosis, next.Diagnosis) {
		changed = append(changed, "diagnosis thresholds")
	}
	if !reflect.DeepEqual(prev.Keys, next.Keys) {
		changed = append(changed, "keys")
	}
	if prev.Log.Level != next.Log.Level {
		changed = append(changed, fmt.Sprintf("log.level %q → %q", prev.Log.Level, next.Log.Level))
	}
	if prev.Metrics.MaxModels != next.Metrics.MaxModels {
		changed = append(changed, fmt.Sprintf("metrics.max_models %d → %d", prev.Metrics.MaxModels, next.Metrics.MaxModels))
	}
	for _, f := range []struct {
		name      string
		was, want any
	}{
		{"listen", start.Listen, next.Listen},
		{"store", store.RedactDSN(start.Store), store.RedactDSN(next.Store)},
		{"retention", start.Retention.D(), next.Retention.D()},
		{"max_body_bytes", start.MaxBodyBytes, next.MaxBodyBytes},
		{"body_read_timeout", start.BodyReadTimeout.D(), next.BodyReadTimeout.D()},
		{"drain_timeout", start.DrainTimeout.D(), next.DrainTimeout.D()},
		{"upstream_idle_timeout", start.UpstreamIdleTimeout.D(), next.UpstreamIdleTimeout.D()},
		{"read_timeout", start.ReadTimeout.D(), next.ReadTimeout.D()},
		{"read_concurrency", start.ReadConcurrency, next.ReadConcurrency},
		{"auth_failures_per_minute", start.AuthFailuresPerMinute, next.AuthFailuresPerMinute},
		{"auth_failure_records_per_minute", start.AuthFailureRecordsPerMinute, next.AuthFailureRecordsPerMinute},
		{"body_budget_bytes", start.BodyBudgetBytes, next.BodyBudgetBytes},
		{"body_budget_per_key_bytes", start.BodyBudgetPerKeyBytes, next.BodyBudgetPerKeyBytes},
		{"max_answer_values", start.MaxAnswerValues, next.MaxAnswerValues},
		{"read_cpu_share", start.ReadCPUShare, next.ReadCPUShare},
		{"user_hash_key_env", start.UserHashKeyEnv, next.UserHashKeyEnv},
		{"log.format", start.Log.Format, next.Log.Format},
		{"metrics.key_env", start.Metrics.KeyEnv, next.Metrics.KeyEnv},
		{"metrics.public", start.Metrics.Public, next.Metrics.Public},
		{"telemetry", start.Telemetry, next.Telemetry},
		{"limits", start.Limits, next.Limits},
	} {
		if !reflect.DeepEqual(f.was, f.want) {
			restart = append(restart, fmt.Sprintf("%s (in use: %v; in the file: %v)", f.name, f.was, f.want))
		}
	}
	if start.Metrics.Key != next.Metrics.Key && start.Metrics.KeyEnv == next.Metrics.KeyEnv {
		restart = append(restart, "metrics key (the value of metrics.key_env)")
	}
	return changed, restart
}

// channelDiff names the fields of a channel that differ; the key by name
// only ("key"), never its value.
func channelDiff(a, b config.Channel) []string {
	var f []string
	add := func(name string, differ bool) {
		if differ {
			f = append(f, name)
		}
	}
	add("protocol", a.Protocol != b.Protocol)
	add("base_url", a.BaseURL != b.BaseURL)
	add("key", a.Secret != b.Secret || a.KeyEnv != b.KeyEnv || a.KeyFile != b.KeyFile)
	add("models", !a.Models.Equal(b.Models))
	add("groups", !slices.Equal(a.Groups, b.Groups))
	add("region", a.Region != b.Region)
	add("priority", a.Priority != b.Priority)
	add("weight", a.Weight != b.Weight)
	add("timeouts", a.Timeouts != b.Timeouts)
	add("stream_usage", !reflect.DeepEqual(a.StreamUsage, b.StreamUsage))
	return f
}

// configuredModels are the model names the channels list without glob
// characters: the operator chose them, so they always keep their label.
func configuredModels(c *config.Config) []string {
	var out []string
	for _, ch := range c.Channels {
		for _, m := range ch.Models.Patterns {
			if !strings.ContainsAny(m, `*?[\`) {
				out = append(out, m)
			}
		}
	}
	return out
}

// registerReload adds POST /api/admin/reload (admin only): reload now and
// answer what changed, or the errors of the invalid file (422).
func (s *Server) registerReload(mux *http.ServeMux) {
	resolve := api.KeyringResolver(s.keys)
	mux.HandleFunc("POST /api/admin/reload", func(w http.ResponseWriter, r *http.Request) {
		p, ok := adminOnly(w, r, resolve, "reloading the configuration takes an admin key")
		if !ok {
			return
		}
		res := s.Reload(r.Context(), TriggerAPI, p.Name)
		status := http.StatusOK
		var body any = res
		if !res.OK {
			status = http.StatusUnprocessableEntity
			body = struct {
				ReloadResult
				Error api.ErrorDetail `json:"error"`
			}{res, api.ErrorDetail{Type: api.TypeInvalidRequest,
				Message: "the configuration file is invalid; nothing changed: " + strings.Join(res.Errors, "; ")}}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
	})
}

// watchConfig reloads when the configuration file, or a key file it
// names, changes. It polls: every interval it reads the files and hashes
// them; a hash that differs from the one in use, and is the same at the
// next poll (the write is over), is reloaded once. Reading the files
// rather than watching for events sees every way a file is replaced — an
// editor's rename, a Kubernetes ConfigMap's or Secret's symlink swap (the
// file's path stays, the ..data link it goes through moves), a network
// filesystem that sends no events — with the standard library alone; a
// configuration file and a few keys read once a second cost nothing.
func (s *Server) watchConfig(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	applied, gen := s.configHash(), s.appliedGen.Load()
	var pending, tried [32]byte
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h := s.configHash()
		switch {
		case h == applied:
			pending = [32]byte{}
		case h != pending:
			pending = h // changed: wait one more poll for the write to end
		case h != tried:
			tried = h
			if res := s.Reload(ctx, TriggerFile, ""); res.OK {
				applied = s.configHash()
			}
		}
		// A reload by another trigger (SIGHUP, the API) applied the file.
		if g := s.appliedGen.Load(); g != gen {
			gen, applied = g, s.configHash()
		}
	}
}

// configHash hashes the configuration file and the key files the
// configuration in use names, as they are now; a file that cannot be read
// hashes as its error.
func (s *Server) configHash() [32]byte {
	h := sha256.New()
	read := func(path string) {
		b, err := os.ReadFile(path)
		if err != nil {
			b = []byte(err.Error())
		}
		sum := sha256.Sum256(b)
		h.Write([]byte(path))
		h.Write(sum[:])
	}
	read(s.cfgPath)
	dir := filepath.Dir(s.cfgPath)
	c := s.cur.Load()
	var files []string
	for _, k := range c.Keys {
		files = append(files, k.KeyFile)
	}
	for _, ch := range c.Channels {
		files = append(files, ch.KeyFile)
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		read(f)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
