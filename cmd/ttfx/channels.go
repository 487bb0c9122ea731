package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ttfx/ttfx/internal/server"
)

func init() {
	register(command{name: "channels", summary: "list a gateway's channels live, or drain, disable, enable or uneject one", run: runChannels})
}

const channelsUsage = `usage: ttfx channels list [flags]
       ttfx channels drain|disable|enable|uneject NAME [flags]

list shows each channel of a running gateway (GET /api/channels): its state
(serving, ejected, drained, disabled), who set an operator's state and which
replicas applied it, requests in flight, and per model the p50/p95 of the
milestone its route ranks it by. drain stops new requests to the channel
(those in flight finish), disable takes it out of rotation, enable puts it
back, uneject readmits it at once where it was ejected (an admin key).

flags:
  --url URL   the gateway (default $TTFX_URL or http://127.0.0.1:8080)
  --key KEY   an admin key (list: or a viewer key) (default $TTFX_ADMIN_KEY)
  --json      print the API's answer
`

func runChannels(ctx context.Context, args []string) error {
	return channelsMain(ctx, args, os.Stdout, os.Getenv)
}

func channelsMain(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	fs := flag.NewFlagSet("channels", flag.ContinueOnError)
	defURL := getenv("TTFX_URL")
	if defURL == "" {
		defURL = "http://127.0.0.1:8080"
	}
	base := fs.String("url", defURL, "")
	key := fs.String("key", getenv("TTFX_ADMIN_KEY"), "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseFlags(fs, args, channelsUsage, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError("name a subcommand: list, drain, disable, enable or uneject\n\n%s", strings.TrimRight(channelsUsage, "\n"))
	}
	if *key == "" {
		return usageError("no key: pass --key or set TTFX_ADMIN_KEY")
	}
	if u, err := url.Parse(*base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usageError("--url %q: want http(s)://host:port", *base)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	switch sub := pos[0]; sub {
	case "list":
		if len(pos) != 1 {
			return usageError("list takes no argument")
		}
		var res server.ChannelsResponse
		raw, err := call(ctx, c, "GET", strings.TrimRight(*base, "/")+"/api/channels", *key, &res)
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := stdout.Write(raw)
			return err
		}
		printChannels(stdout, res)
		return nil
	case server.ActionDrain, server.ActionDisable, server.ActionEnable, server.ActionUneject:
		if len(pos) != 2 {
			return usageError("%s takes one channel name", sub)
		}
		var res server.ChannelAction
		raw, err := call(ctx, c, "POST", strings.TrimRight(*base, "/")+"/api/channels/"+url.PathEscape(pos[1])+"/"+sub, *key, &res)
		if err != nil {
			return err
		}
		if *asJSON {
			_, err := stdout.Write(raw)
			return err
		}
		switch {
		case sub == server.ActionUneject && len(res.Unejected) == 0:
			fmt.Fprintf(stdout, "%s was not ejected for any model\n", res.Channel)
		case sub == server.ActionUneject:
			fmt.Fprintf(stdout, "%s readmitted for %s\n", res.Channel, strings.Join(res.Unejected, ", "))
		default:
			fmt.Fprintf(stdout, "%s: %s by %s (%d in flight)\n", res.Channel, res.View.State, res.By, res.View.Inflight)
		}
		return nil
	default:
		return usageError("unknown subcommand %q: want list, drain, disable, enable or uneject", sub)
	}
}

// call makes one API call and decodes its JSON answer into v; an error
// answer becomes an error carrying the API's message.
func call(ctx context.Context, c *http.Client, method, u, key string, v any) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Message != "" {
			return nil, fmt.Errorf("%s: %s", resp.Status, e.Error.Message)
		}
		return nil, fmt.Errorf("%s", resp.Status)
	}
	return raw, json.Unmarshal(raw, v)
}

func printChannels(w io.Writer, res server.ChannelsResponse) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHANNEL\tPROTOCOL\tSTATE\tINFLIGHT\tOPERATOR\tMODEL\tMILESTONE\tP50\tP95\tEJECTION")
	for _, c := range res.Channels {
		op := "-"
		if o := c.Operator; o != nil {
			var reps []string
			for _, r := range o.Replicas {
				reps = append(reps, r.Replica)
			}
			op = fmt.Sprintf("%s by %s (applied: %s)", o.State, o.By, strings.Join(reps, ","))
		}
		if len(c.Live) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t-\t-\t-\t-\t-\n", c.Name, c.Protocol, c.State, c.Inflight, op)
			continue
		}
		for i, m := range c.Live {
			name, proto, state, infl, o := c.Name, c.Protocol, c.State, fmt.Sprint(c.Inflight), op
			if i > 0 {
				name, proto, state, infl, o = "", "", "", "", ""
			}
			ej := "-"
			if m.State != "healthy" {
				ej = m.State
				if m.EjectedUntil != nil {
					ej += " until " + m.EjectedUntil.Local().Format("15:04:05")
				}
				ej += ": " + m.Reason
			}
			p50, p95 := "-", "-"
			if m.Samples > 0 {
				p50, p95 = fmt.Sprintf("%.0fms", m.P50), fmt.Sprintf("%.0fms", m.P95)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, proto, state, infl, o, m.Model, m.Milestone, p50, p95, ej)
		}
	}
	tw.Flush()
}
