package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/config"
)

// errHelp: the command printed its usage because --help asked for it; ttfx
// exits 0 without another word.
var errHelp = errors.New("help requested")

// parseFlags parses args with fs, flags and arguments in any order (`ttfx
// diagnose ID --json`), and returns the arguments. -h or --help prints
// usage once on stdout — followed by the flags' descriptions when they have
// any — and returns errHelp; a bad flag is a usage error (exit 2) that
// carries usage. An empty usage is "usage: ttfx NAME [flags]".
func parseFlags(fs *flag.FlagSet, args []string, usage string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // printed below, once
	if usage == "" {
		usage = "usage: ttfx " + fs.Name() + " [flags]\n"
	}
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			described := false
			fs.VisitAll(func(f *flag.Flag) { described = described || f.Usage != "" })
			if described {
				var b strings.Builder
				fs.SetOutput(&b)
				fs.PrintDefaults()
				fs.SetOutput(io.Discard)
				fmt.Fprintf(stdout, "\nflags:\n%s", b.String())
			}
			return nil, errHelp
		}
		if err != nil {
			return nil, usageError("%v\n\n%s", err, strings.TrimRight(usage, "\n"))
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		// "--" ends the flags: everything after it is an argument.
		if len(args) > len(fs.Args()) && args[len(args)-len(fs.Args())-1] == "--" {
			return append(pos, fs.Args()...), nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseNoArgs is parseFlags for a command that takes flags only.
func parseNoArgs(fs *flag.FlagSet, args []string, usage string, stdout io.Writer) error {
	pos, err := parseFlags(fs, args, usage, stdout)
	if err == nil && len(pos) > 0 {
		err = usageError("unexpected argument %q\n\n%s", pos[0], strings.TrimRight(usage, "\n"))
	}
	return err
}

// durationVar defines a duration flag that takes days too ("7d", "1d12h"),
// as every duration of ttfx does (config.ParseDuration).
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration) {
	*p = value
	fs.Var((*durationFlag)(p), name, "")
}

type durationFlag time.Duration

func (f *durationFlag) String() string { return time.Duration(*f).String() }

func (f *durationFlag) Set(s string) error {
	d, err := config.ParseDuration(s)
	if err != nil {
		return err
	}
	*f = durationFlag(d)
	return nil
}
