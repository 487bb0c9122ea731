package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/sim"
)

func init() {
	register(command{name: "sim", summary: "run the simulated provider (every registered API and provider kind, timing profiles, faults, replay)", run: runSim})
}

// simShutdownGrace is how long open streams may run on after SIGINT or
// SIGTERM before they are cut.
const simShutdownGrace = 5 * time.Second

func runSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9001", "address to listen on (host:port; port 0 picks a free one)")
	profiles := fs.String("profiles", "", "YAML file of profiles, merged over the built-in ones")
	replay := fs.String("replay", "", "recorded .sse file served for every model that matches no profile")
	def := fs.String("default", "", "profile that serves models matching no profile (default: 404)")
	key := fs.String("key-env", "", "name of an environment variable holding an API key that requests must present")
	verbose := fs.Bool("v", false, "log every request to stderr")
	usage := `usage: ttfx sim [--listen ADDR] [--profiles FILE] [--replay FILE.sse] [--default NAME] [--key-env VAR] [-v]

Serves every client-facing API and provider kind whose simulator side is
registered, with the timing of the profile the request's model names:

` + simServed() + `
A replay file may carry its timing in comment lines ": t=MS" (the next
event is sent MS ms after receipt) and ": headers=MS"; without them events
go out 10 ms apart.
`
	if err := parseNoArgs(fs, args, usage, os.Stdout); err != nil {
		return err
	}

	set := sim.Builtin()
	if *profiles != "" {
		loaded, err := sim.LoadProfiles(*profiles)
		if err != nil {
			return err
		}
		for n, p := range loaded {
			set[n] = p
		}
	}
	opts := sim.Options{Profiles: set, Default: *def}
	if *replay != "" {
		p, err := sim.ReplayProfile(*replay)
		if err != nil {
			return err
		}
		set["replay"] = p
		if opts.Default == "" {
			opts.Default = "replay"
		}
	}
	if opts.Default != "" {
		if _, ok := set[opts.Default]; !ok {
			return usageError("--default %q is not a profile (have: %s)", opts.Default, strings.Join(sim.Names(set), ", "))
		}
	}
	for _, n := range sim.Names(set) {
		if err := set[n].Validate(); err != nil {
			return fmt.Errorf("profile %q: %w", n, err)
		}
	}
	if *key != "" {
		opts.APIKey = os.Getenv(*key)
		if opts.APIKey == "" {
			return usageError("--key-env %s: the variable is empty or not set", *key)
		}
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: sim.New(opts), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("ttfx sim listening on http://%s\n", ln.Addr())
	fmt.Printf("profiles: %s\n", strings.Join(sim.Names(set), ", "))
	if opts.Default != "" {
		fmt.Printf("default profile: %s\n", opts.Default)
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Let open streams finish for a moment, then cut what is left.
	fmt.Fprintf(os.Stderr, "ttfx sim: shutting down (open streams get %v)\n", simShutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), simShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// simServed lists the simulator's registered APIs and kinds with their
// paths, one line each.
func simServed() string {
	var b strings.Builder
	for _, sv := range sim.ServedPaths() {
		fmt.Fprintf(&b, "  %s\n", sv.Name)
		for _, p := range sv.Paths {
			fmt.Fprintf(&b, "      %s\n", p)
		}
	}
	return b.String()
}
