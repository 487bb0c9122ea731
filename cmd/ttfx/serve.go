package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/telemetry"
	"github.com/ttfx/ttfx/internal/tokens"
	"github.com/ttfx/ttfx/internal/wire"
)

func init() {
	register(command{name: "serve", summary: "run the gateway (no config: SQLite ttfx.db and a built-in simulator)", run: runServe})
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML configuration `file` (SPEC §10); none: zero-config gateway")
	listen := fs.String("listen", "", "listen `address`, overriding the configuration")
	if err := parseNoArgs(fs, args, "usage: ttfx serve [--config FILE] [--listen ADDR]\n", os.Stdout); err != nil {
		return err
	}
	var cfg *config.Config
	var err error
	if *configPath != "" {
		if cfg, err = config.Load(*configPath, os.Getenv); err != nil {
			return err
		}
	}
	var lc config.Log
	if cfg != nil {
		lc = cfg.Log
	}
	logger, level, err := telemetry.NewLoggerVar(os.Stderr, lc.Format, lc.Level)
	if err != nil {
		return err
	}
	if cfg != nil {
		for _, w := range cfg.Warnings() {
			logger.Warn(w)
		}
	}
	// Every stream past 2 KiB of text counts its tokens as it goes: the
	// tokenizer's table is built now, not in the first such stream's wait
	// for its next event (30–70 ms under load, holding any other).
	go tokens.Load()
	srv, err := server.New(ctx, server.Options{Config: cfg, Listen: *listen, Logger: logger, LogLevel: level, ConfigPath: *configPath})
	if err != nil {
		return err
	}
	// SIGHUP reloads the configuration file (issue 48); the file is also
	// watched, and POST /api/admin/reload does the same.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				srv.Reload(ctx, server.TriggerSignal, "")
			}
		}
	}()
	fmt.Printf("ttfx gateway listening on %s\n", srv.URL())
	if cfg == nil {
		fmt.Printf("zero-config: store sqlite:ttfx.db, simulator channels %s at %s\n", strings.Join(simChannelNames(), ", "), srv.SimURL())
	}
	hint := "ttfx keys"
	if *configPath != "" {
		hint += " --config " + *configPath
	}
	srv.WriteKeys(os.Stdout, hint)
	fmt.Printf("dashboard: %s/ui/   metrics: %s/metrics   API: %s/api/requests\n", srv.URL(), srv.URL(), srv.URL())
	// SIGINT or SIGTERM: say what the wait that follows is, before it.
	served := make(chan struct{})
	defer close(served)
	sctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		select {
		case <-served:
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "ttfx serve: %v: draining: no new connections; streams in flight have up to %v (drain_timeout) to finish, then the queued records are written\n",
				context.Cause(ctx), srv.DrainTimeout())
			stop()
		}
	}()
	if err := srv.Serve(sctx); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "ttfx serve: drained and stopped")
	return nil
}

// simChannelNames names the zero-config simulator channels: one per
// provider kind that asks for one (wire.Kind.ZeroConfig), as the server
// makes them.
func simChannelNames() []string {
	var out []string
	for _, k := range wire.Kinds() {
		if k.ZeroConfig {
			out = append(out, "sim-"+k.Name)
		}
	}
	return out
}
