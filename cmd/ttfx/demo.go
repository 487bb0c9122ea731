package main

import (
	"context"
	"flag"
	"log/slog"
	"os"

	"github.com/ttfx/ttfx/internal/demo"
)

func init() {
	register(command{name: "demo", summary: "gateway + simulator + sample traffic: traces A, B, C and a mixed load, with their diagnosis", run: runDemo})
}

func runDemo(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	stay := fs.Bool("stay", false, "keep the demo gateway serving after the traffic, until Ctrl-C")
	listen := fs.String("listen", "", "gateway `address` (default 127.0.0.1:8080, or a free port if taken)")
	dir := fs.String("dir", "", "`directory` of ttfx.db, the demo's store (default: the working directory)")
	if err := parseNoArgs(fs, args, "usage: ttfx demo [--stay] [--listen ADDR] [--dir DIR]\n", os.Stdout); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	return demo.Run(ctx, demo.Options{Dir: *dir, Listen: *listen, Stay: *stay, Out: os.Stdout, Logger: log})
}
