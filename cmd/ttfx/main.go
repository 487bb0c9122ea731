// Command ttfx is an AI API gateway that records where the time of every LLM
// request went, with a simulator and a benchmark client beside it.
//
// Each subcommand lives in its own file and registers itself; this file only
// dispatches, wires signals and maps errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	_ "github.com/ttfx/ttfx/internal/store/chstore"  // registers ClickHouse
	_ "github.com/ttfx/ttfx/internal/store/sqlstore" // registers SQLite and PostgreSQL
)

// command is one subcommand of ttfx.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string) error
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// exitError carries an exit code other than 1 (2 for usage errors, and the
// codes a command documents).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: ttfx <command> [flags]    (ttfx <command> --help for its flags)\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "--help", "help":
		usage(os.Stdout)
		return
	case "--version", "-version":
		os.Args[1] = "version"
	}
	c, ok := commands[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "ttfx: unknown command %q\n", os.Args[1])
		usage(os.Stderr)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := c.run(ctx, os.Args[2:])
	stop()
	if errors.Is(err, errHelp) {
		return
	}
	if err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
		}
		if !errors.Is(err, errSilent) {
			fmt.Fprintf(os.Stderr, "ttfx %s: %v\n", c.name, err)
		}
		os.Exit(code)
	}
}

// errSilent marks an error whose message the command already printed.
var errSilent = errors.New("already reported")
