package main

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"strings"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/diagnose"
)

func init() {
	register(command{name: "diagnose", summary: "explain one request: waterfall, verdicts in order, advice, context", run: runDiagnose})
}

const diagnoseUsage = `usage: ttfx diagnose [flags] REQUEST_ID

Prints the request's timeline as a waterfall (t0…t7, local phases, attempts),
its verdicts in the fixed order of SPEC §4 with what to check and what would
not help, and the context: the same channel and model around that time.

  --url URL   gateway base URL (default $TTFX_URL or http://127.0.0.1:8080)
  --key KEY   admin or viewer key (default $TTFX_ADMIN_KEY); a client key
              may read its own requests
  --json      print the record and the report as JSON
`

func runDiagnose(ctx context.Context, args []string) error {
	return diagnoseMain(ctx, args, os.Stdout, os.Getenv)
}

func diagnoseMain(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("diagnose", flag.ContinueOnError)
	defURL := getenv("TTFX_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:8080"
	}
	base := fs.String("url", defURL, "")
	key := fs.String("key", getenv("TTFX_ADMIN_KEY"), "")
	asJSON := fs.Bool("json", false, "")
	ids, err := parseFlags(fs, args, diagnoseUsage, stdout)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return usageError("want one request id, got %d\n\n%s", len(ids), strings.TrimRight(diagnoseUsage, "\n"))
	}
	id := ids[0]
	c := &api.Client{BaseURL: *base, Key: *key}
	rec, err := c.Request(ctx, id)
	if err != nil {
		return err
	}
	rep, err := c.Diagnosis(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"record": rec, "diagnosis": rep})
	}
	return diagnose.WriteText(stdout, rec, rep)
}
