package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/timeline"
)

func init() {
	register(command{name: "requests", summary: "list recent request records from a gateway's API as a table", run: runRequests})
}

const requestsUsage = `usage: ttfx requests [flags]

Lists recent requests, newest first, from a running gateway's read API
(GET /api/requests): id, time, API, model, channel, status, the timeline
fields in milliseconds (headers = upstream_headers_ms, first response,
first text, total), visible tokens per second and the primary verdict.
"-" is a value that is absent (the mark did not happen).

flags:
  --url URL        the gateway (default $TTFX_URL or http://127.0.0.1:8080)
  --key KEY        an admin or viewer key (default $TTFX_ADMIN_KEY)
  --model M        only this model
  --channel C      only this channel
  --group G        only this group
  --status S       only this terminal status (ok, truncated, header_timeout, ...)
  --label L        only requests carrying this diagnosis label
  --since D        only the last D (e.g. 15m, 1h, 7d)
  --limit N        at most N requests (default 20)
  --json           one JSON record per line (the API's record shape) instead of a table
`

func runRequests(ctx context.Context, args []string) error {
	return requestsMain(ctx, args, os.Stdout, os.Getenv)
}

// requestsMain is runRequests with its output and environment given, for
// tests.
func requestsMain(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("requests", flag.ContinueOnError)
	defURL := getenv("TTFX_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:8080"
	}
	base := fs.String("url", defURL, "")
	key := fs.String("key", getenv("TTFX_ADMIN_KEY"), "")
	model := fs.String("model", "", "")
	channel := fs.String("channel", "", "")
	group := fs.String("group", "", "")
	status := fs.String("status", "", "")
	label := fs.String("label", "", "")
	since := fs.String("since", "", "")
	limit := fs.Int("limit", 20, "")
	asJSON := fs.Bool("json", false, "")
	if err := parseNoArgs(fs, args, requestsUsage, stdout); err != nil {
		return err
	}
	if *limit < 1 {
		return usageError("--limit: want at least 1, got %d", *limit)
	}
	if *key == "" {
		return usageError("no key: pass --key or set TTFX_ADMIN_KEY")
	}
	if u, err := url.Parse(*base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("--url: want http://host:port, got %q", *base)
	}
	q := url.Values{}
	for name, v := range map[string]string{"model": *model, "channel": *channel, "group": *group,
		"status": *status, "label": *label, "since": *since} {
		if v != "" {
			q.Set(name, v)
		}
	}

	c := &api.Client{BaseURL: *base, Key: *key}
	var recs []record.Record
	more := false // the API has rows past the last one fetched
	for len(recs) < *limit {
		q.Set("limit", strconv.Itoa(min(*limit-len(recs), store.MaxLimit)))
		page, err := c.Requests(ctx, q)
		if err != nil {
			var ae *api.APIError
			if errors.As(err, &ae) && ae.Status == 400 {
				return usageError("%s", ae.Message)
			}
			return fmt.Errorf("%s: %w", *base, err)
		}
		recs = append(recs, page.Requests...)
		if more = page.NextCursor != nil; !more {
			break
		}
		q.Set("cursor", *page.NextCursor)
	}

	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range recs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		if more {
			// Beside the JSON lines, not among them.
			fmt.Fprintf(os.Stderr, "ttfx requests: the newest %d shown; more requests match (--limit N shows more)\n", len(recs))
		}
		return nil
	}
	if err := printRequests(stdout, recs, time.Local); err != nil {
		return err
	}
	if more {
		fmt.Fprintf(stdout, "(the newest %d shown; more requests match: --limit N shows more, --since or a filter fewer)\n", len(recs))
	}
	return nil
}

// printRequests writes recs as a table; times are in loc, with its zone.
func printRequests(w io.Writer, recs []record.Record, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tAPI\tMODEL\tCHANNEL\tSTATUS\tHEADERS ms\tFIRST RESP ms\tFIRST TEXT ms\tTOTAL ms\tTPS\tVERDICT")
	for _, r := range recs {
		st := r.Status
		if r.HTTPStatus != 0 && r.HTTPStatus != 200 {
			st += " " + strconv.Itoa(r.HTTPStatus)
		}
		verdict := "-"
		if len(r.Diagnosis) > 0 {
			verdict = r.Diagnosis[0]
			if n := len(r.Diagnosis) - 1; n > 0 {
				verdict += fmt.Sprintf(" +%d", n)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			printable(r.RequestID), r.Timestamp.In(loc).Format(timeLayout),
			printable(r.API), printable(orDash(r.Model)), printable(orDash(r.Channel)), printable(st),
			msCell(r.UpstreamHeadersMs.Ms()), msCell(r.FirstResponseMs.Ms()), msCell(r.FirstTextDeltaMs.Ms()),
			msCell(r.TotalHandlerMs.Ms()), rateCell(r.VisibleOutputTPS), printable(verdict))
	}
	if len(recs) == 0 {
		fmt.Fprintln(tw, "(no requests match)")
	}
	return tw.Flush()
}

func msCell(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func rateCell(r timeline.Rate) string {
	v, ok := r.Get()
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printable keeps a client-chosen string (a model name) from writing
// control sequences to the terminal or breaking the table's columns.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\t' || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
}
