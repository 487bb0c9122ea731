package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/telemetry"
)

func init() {
	register(command{name: "serve", summary: "run the gateway (no config: SQLite ttfx.db and a built-in simulator)", run: runServe})
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML configuration `file` (SPEC §10); none: zero-config gateway")
	listen := fs.String("listen", "", "listen `address`, overriding the configuration")
	if err := fs.Parse(args); err != nil {
		return usageError("%v", err)
	}
	var cfg *config.Config
	var err error
	if *configPath != "" {
		if cfg, err = config.Load(*configPath, os.Getenv); err != nil {
			return err
		}
	}
	logger, err := newLogger(cfg)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, server.Options{Config: cfg, Listen: *listen, Logger: logger})
	if err != nil {
		return err
	}
	fmt.Printf("ttfx gateway listening on %s\n", srv.URL())
	if cfg == nil {
		fmt.Printf("zero-config: store sqlite:ttfx.db, simulator channels sim-openai, sim-anthropic, sim-gemini at %s\n", srv.SimURL())
	}
	printKeys(srv.Generated())
	fmt.Printf("dashboard: %s/ui/   metrics: %s/metrics   API: %s/api/requests\n", srv.URL(), srv.URL(), srv.URL())
	return srv.Serve(ctx)
}

// printKeys shows keys generated on this start, once: only their hashes are kept.
func printKeys(keys []server.Generated) {
	if len(keys) == 0 {
		return
	}
	fmt.Println("new keys (shown once; only their hashes are stored in ttfx.keys.json):")
	for _, k := range keys {
		group := ""
		if k.Group != "" {
			group = " group " + k.Group
		}
		fmt.Printf("  %-8s %-7s%s  %s\n", k.Name, k.Role, group, k.Secret)
	}
}

// newLogger builds the structured logger of the configuration on stderr;
// a misspelt level or format is an error (telemetry.NewLogger).
func newLogger(cfg *config.Config) (*slog.Logger, error) {
	var lc config.Log
	if cfg != nil {
		lc = cfg.Log
	}
	return telemetry.NewLogger(os.Stderr, lc.Format, lc.Level)
}
