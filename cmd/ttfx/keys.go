package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/store"
)

func init() {
	register(command{name: "keys", summary: "list, make, rotate and revoke API keys in a gateway's store", run: runKeys})
}

const keysUsage = `usage:
  ttfx keys list [--all]                                 the keys: name, role, group, where they come from, state
  ttfx keys new --name N --role R [--group G]            make a key (R: admin, viewer or client; a viewer needs a group)
  ttfx keys rotate NAME [--grace D]                      a new secret for NAME; the old one works for D more (default 24h)
  ttfx keys revoke NAME                                  NAME stops working, every secret of it

Which gateway's keys: --config FILE (its store; its own keys are listed, and
stay in the file), --store DSN, or by default the zero-config gateway's
sqlite:ttfx.db in --dir (default: the working directory).

A new secret is printed once, as "export TTFX_NAME_KEY=…"; only its SHA-256
is kept. Gateways on the store read its keys every 2 s: a key made, rotated
or revoked works or stops working on every replica within seconds, without a
restart.
`

// keysSub are the subcommands of ttfx keys.
var keysSub = []string{"list", "new", "rotate", "revoke"}

func runKeys(ctx context.Context, args []string) error {
	return keysMain(ctx, args, os.Stdout, os.Stderr)
}

// keysMain is runKeys with its outputs given, for tests: secrets go to
// stdout (so `eval "$(ttfx keys new …)"` works), what happened to stderr.
func keysMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fset := flag.NewFlagSet("keys", flag.ContinueOnError)
	configPath := fset.String("config", "", "")
	dsn := fset.String("store", "", "")
	dir := fset.String("dir", "", "")
	all := fset.Bool("all", false, "")
	name := fset.String("name", "", "")
	role := fset.String("role", "", "")
	group := fset.String("group", "", "")
	var grace time.Duration
	durationVar(fset, &grace, "grace", server.DefaultRotateGrace)
	pos, err := parseFlags(fset, args, keysUsage, stdout)
	if err != nil {
		return err
	}
	usage := strings.TrimRight(keysUsage, "\n")
	if len(pos) == 0 || !slices.Contains(keysSub, pos[0]) {
		return usageError("want one of %s\n\n%s", strings.Join(keysSub, ", "), usage)
	}
	sub, pos := pos[0], pos[1:]
	// Each subcommand takes its own flags only.
	allowed := map[string][]string{"list": {"all"}, "new": {"name", "role", "group"}, "rotate": {"grace"}, "revoke": nil}[sub]
	var stray []string
	fset.Visit(func(f *flag.Flag) {
		if !slices.Contains([]string{"config", "store", "dir"}, f.Name) && !slices.Contains(allowed, f.Name) {
			stray = append(stray, "--"+f.Name)
		}
	})
	if len(stray) > 0 {
		return usageError("keys %s does not take %s\n\n%s", sub, strings.Join(stray, ", "), usage)
	}
	wantArgs := map[string]int{"list": 0, "new": 0, "rotate": 1, "revoke": 1}[sub]
	if len(pos) != wantArgs {
		if wantArgs == 1 {
			return usageError("keys %s: want one key name\n\n%s", sub, usage)
		}
		return usageError("keys %s: unexpected argument %q\n\n%s", sub, pos[0], usage)
	}
	if *configPath != "" && *dsn != "" {
		return usageError("give --config or --store, not both")
	}

	var cfgKeys []config.Key
	switch {
	case *configPath != "":
		cfg, err := config.LoadUnresolved(*configPath)
		if err != nil {
			return err
		}
		*dsn, cfgKeys = cfg.Store, cfg.Keys
	case *dsn == "":
		file := filepath.Join(*dir, "ttfx.db")
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no %s here: `ttfx serve` makes it and the first keys on its first start; for a configured gateway pass --config FILE or --store DSN", file)
		}
		*dsn = "sqlite:" + file
	}
	st, err := store.Open(ctx, *dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	where := store.RedactDSN(*dsn)

	switch sub {
	case "list":
		rows, err := server.ListKeys(ctx, st)
		if err != nil {
			return err
		}
		return writeKeys(stdout, cfgKeys, rows, *all, time.Now())
	case "new":
		var reserved []string
		for _, k := range cfgKeys {
			reserved = append(reserved, k.Name)
		}
		g, err := server.NewKey(ctx, st, *name, *role, *group, reserved)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, g.Export())
		fmt.Fprintf(stderr, "made key %s (%s%s) in %s; gateways on it accept it within %s.\nthe secret is shown this once: only its hash is kept.\n",
			g.Name, g.Role, groupText(g.Group), where, server.DefaultKeyPoll)
	case "rotate":
		if grace < 0 {
			return usageError("--grace must not be negative")
		}
		g, err := server.RotateKey(ctx, st, pos[0], grace)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, g.Export())
		fmt.Fprintf(stderr, "new secret for %s in %s; gateways on it accept it within %s.\nthe old secret keeps working for the grace period of %s, until %s (--grace sets it).\n",
			g.Name, where, server.DefaultKeyPoll, grace, time.Now().Add(grace).Format(timeLayout))
	case "revoke":
		n, err := server.RevokeKey(ctx, st, pos[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "revoked %s (%d secret%s) in %s; gateways on it refuse it within %s.\n",
			pos[0], n, plural(n), where, server.DefaultKeyPoll)
	}
	return nil
}

// timeLayout is how the command line prints a moment: local time with its
// zone, so that a reader elsewhere knows which hour it is.
const timeLayout = "2006-01-02 15:04:05 MST"

func writeKeys(w io.Writer, cfgKeys []config.Key, rows []store.KeyRow, all bool, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tGROUP\tFROM\tMADE\tSTATE")
	for _, k := range cfgKeys {
		fmt.Fprintf(tw, "%s\t%s\t%s\tconfig\t-\tlive while $%s holds it\n", k.Name, k.Role, dash(k.Group), k.KeyEnv)
	}
	hidden := 0
	for _, k := range rows {
		state := "live"
		switch {
		case !k.Live(now):
			if !all {
				hidden++
				continue
			}
			state = "ended " + k.Expires.Local().Format(timeLayout)
		case !k.Expires.IsZero():
			state = "until " + k.Expires.Local().Format(timeLayout) + " (rotated)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\tstore\t%s\t%s\n", k.Name, k.Role, dash(k.Group), k.Created.Local().Format(timeLayout), state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if hidden > 0 {
		fmt.Fprintf(w, "(%d ended key%s not shown: --all shows them)\n", hidden, plural(hidden))
	}
	return nil
}

func groupText(g string) string {
	if g == "" {
		return ""
	}
	return ", group " + g
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
