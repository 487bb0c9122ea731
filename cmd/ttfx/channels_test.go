package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/server"
)

// channelsCLI runs `ttfx channels ARGS` against a gateway.
func channelsCLI(t *testing.T, p *process, key string, args ...string) string {
	t.Helper()
	cmd := exec.Command(ttfxBinary(t), append([]string{"channels"}, args...)...)
	cmd.Env = append(os.Environ(), "TTFX_URL="+p.url, "TTFX_ADMIN_KEY="+key)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ttfx channels %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func listChannels(t *testing.T, url, key string) (int, server.ChannelsResponse) {
	t.Helper()
	req, _ := http.NewRequest("GET", url+"/api/channels", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res server.ChannelsResponse
	json.NewDecoder(resp.Body).Decode(&res)
	return resp.StatusCode, res
}

func channelByName(res server.ChannelsResponse, name string) server.ChannelView {
	for _, c := range res.Channels {
		if c.Name == name {
			return c
		}
	}
	return server.ChannelView{}
}

// TestChannelsDrainEjectUneject runs the operator's day on `ttfx serve`: a
// failing channel is ejected and GET /api/channels says until when and why;
// `ttfx channels uneject` readmits it. Twenty long streams are in flight on
// a channel when `ttfx channels drain` runs: they all finish, new requests go
// elsewhere, the drain survives a reload and is shown as the operator's,
// and enable puts the channel back. Viewers see their group's channels only.
func TestChannelsDrainEjectUneject(t *testing.T) {
	upA := httptest.NewServer(slowSim())
	defer upA.Close()
	upB := httptest.NewServer(slowSim())
	defer upB.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(`{"error":{"message":"upstream broken","type":"server_error"}}`))
	}))
	defer bad.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "ttfx.yaml")
	conf := func(aTotal string) string {
		return fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: T_ADMIN}
  - {name: app, role: client, group: team-a, key_env: T_CLIENT}
  - {name: look, role: viewer, group: team-a, key_env: T_VIEWER}
channels:
  - {name: bad, protocol: openai, base_url: %q, key_env: T_UP, models: [quick], priority: 0}
  - {name: a, protocol: openai, base_url: %q, key_env: T_UP, models: [slow, quick], priority: 1, timeouts: {total: %s}}
  - {name: b, protocol: openai, base_url: %q, key_env: T_UP, models: [slow, quick], priority: 2}
  - {name: private, protocol: openai, base_url: %q, key_env: T_UP, groups: [team-b], priority: 3}
routes:
  - {models: ["*"], strategy: priority, eject: {consecutive_failures: 2, base: 1m}}
`, "sqlite:"+filepath.Join(dir, "ttfx.db"), bad.URL, upA.URL, aTotal, upB.URL, upB.URL)
	}
	os.WriteFile(cfg, []byte(conf("60s")), 0o644)
	p := serve(t, dir, []string{"T_ADMIN=admin-secret-1", "T_CLIENT=client-secret-1", "T_VIEWER=viewer-secret-1", "T_UP=upstream-1"}, "--config", cfg)
	const admin, client = "admin-secret-1", "client-secret-1"

	// Ejection: two 5xx in a row from bad, each mended by a fallback.
	for range 2 {
		id, err := stream(p.url, client, "quick")
		if err != nil {
			t.Fatal(err)
		}
		if rec := readRecord(t, p.url, admin, id); len(rec.Attempts) != 2 || rec.Channel != "a" {
			t.Fatalf("record %+v", rec)
		}
	}
	_, res := listChannels(t, p.url, admin)
	v := channelByName(res, "bad")
	if v.State != "ejected" || len(v.Ejections) != 1 || v.Ejections[0].Model != "quick" || v.Ejections[0].Until == nil ||
		!strings.Contains(v.Ejections[0].Reason, "2 consecutive failures, the last a 5xx status") {
		t.Fatalf("bad's view: %+v", v)
	}
	if d := time.Until(*v.Ejections[0].Until); d < 50*time.Second || d > 61*time.Second {
		t.Errorf("ejected until %v from now, want about 1m", d)
	}
	if v.Key != "env T_UP" || strings.Contains(fmt.Sprint(res), "upstream-1") {
		t.Errorf("key shown as %q", v.Key)
	}
	id, _ := stream(p.url, client, "quick")
	if rec := readRecord(t, p.url, admin, id); len(rec.Attempts) != 1 || !slices.Equal(rec.SkippedEjected, []string{"bad"}) {
		t.Fatalf("ejected bad was tried: %+v", rec)
	}
	out := channelsCLI(t, p, admin, "list")
	if !strings.Contains(out, "bad") || !strings.Contains(out, "ejected until") || !strings.Contains(out, "2 consecutive failures") {
		t.Errorf("ttfx channels list:\n%s", out)
	}
	if out := channelsCLI(t, p, admin, "uneject", "bad"); !strings.Contains(out, "bad readmitted for quick") {
		t.Fatalf("uneject: %s", out)
	}
	if _, res := listChannels(t, p.url, admin); channelByName(res, "bad").State != "serving" {
		t.Fatalf("after uneject: %+v", channelByName(res, "bad"))
	}
	id, _ = stream(p.url, client, "quick")
	if rec := readRecord(t, p.url, admin, id); len(rec.Attempts) != 2 || rec.Attempts[0].Channel != "bad" {
		t.Fatalf("unejected bad was not tried first: %+v", rec.Attempts)
	}

	// Drain with 20 long streams in flight on a.
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	ids := make([]string, n)
	for i := range n {
		wg.Go(func() { ids[i], errs[i] = stream(p.url, client, "slow") })
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, res := listChannels(t, p.url, admin)
		if channelByName(res, "a").Inflight == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("streams not in flight: %+v", channelByName(res, "a"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if out := channelsCLI(t, p, admin, "drain", "a"); !strings.Contains(out, "a: drained by ops (20 in flight)") {
		t.Fatalf("drain: %s", out)
	}
	id, err := stream(p.url, client, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if rec := readRecord(t, p.url, admin, id); rec.Channel != "b" || slices.ContainsFunc(rec.Attempts, func(a record.Attempt) bool { return a.Channel == "a" }) {
		t.Fatalf("a request after the drain went to %s (%+v)", rec.Channel, rec.Attempts)
	}
	// The dashboard's Channels view shows the state and, to an admin, the
	// actions.
	view := func(key string) string {
		req, _ := http.NewRequest("GET", p.url+"/ui/view/channels?since=1h", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if body := view(admin); !strings.Contains(body, `<td data-state="drained">drained</td><td data-operator>drained by ops at `) ||
		!strings.Contains(body, `data-channel-action="enable" data-name="a"`) || !strings.Contains(body, `data-channel-action="uneject" data-name="bad"`) {
		t.Errorf("the dashboard's channels view after the drain:\n%s", grepLines(body, "data-channel="))
	}
	if body := view("viewer-secret-1"); strings.Contains(body, "data-channel-action") || !strings.Contains(body, `data-state="drained"`) {
		t.Errorf("a viewer's channels view offers actions or lacks the state")
	}
	// A reload keeps the operator's drain.
	os.WriteFile(cfg, []byte(conf("90s")), 0o644)
	if code, r := adminPost(t, p.url, admin, "/api/admin/reload"); code != 200 || !strings.Contains(fmt.Sprint(r["changed"]), "a (timeouts)") {
		t.Fatalf("reload: %d %v", code, r)
	}
	_, res = listChannels(t, p.url, admin)
	v = channelByName(res, "a")
	if v.State != "drained" || v.Operator == nil || v.Operator.By != "ops" || v.Operator.Drained || v.Timeouts.Total != "1m30s" {
		t.Fatalf("a after the reload: %+v %+v", v, v.Operator)
	}
	if len(v.Operator.Replicas) != 1 || !v.Operator.Replicas[0].Self || v.Operator.Replicas[0].Replica != res.Replica {
		t.Errorf("replicas: %+v", v.Operator.Replicas)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("stream %d cut by the drain: %v", i, err)
		}
	}
	for _, id := range ids {
		if rec := readRecord(t, p.url, admin, id); rec.Channel != "a" || rec.Status != "ok" {
			t.Fatalf("drained stream %s: %s %s", id, rec.Channel, rec.Status)
		}
	}
	if _, res = listChannels(t, p.url, admin); !channelByName(res, "a").Operator.Drained {
		t.Errorf("drained is not set once the streams ended: %+v", channelByName(res, "a").Operator)
	}
	// Disable b as well: slow has no channel left, and says why.
	channelsCLI(t, p, admin, "disable", "b")
	if _, err := stream(p.url, client, "slow"); err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "drained or disabled by an operator (a, b)") {
		t.Fatalf("all held: %v", err)
	}
	channelsCLI(t, p, admin, "enable", "a")
	channelsCLI(t, p, admin, "enable", "b")
	id, _ = stream(p.url, client, "slow")
	if rec := readRecord(t, p.url, admin, id); rec.Channel != "a" {
		t.Fatalf("after enable: %s", rec.Channel)
	}

	// Viewers see the channels their group may use; clients none; only
	// admins act.
	code, res := listChannels(t, p.url, "viewer-secret-1")
	var names []string
	for _, c := range res.Channels {
		names = append(names, c.Name)
	}
	if code != 200 || !slices.Equal(names, []string{"bad", "a", "b"}) {
		t.Errorf("viewer sees %d %v", code, names)
	}
	if code, _ := listChannels(t, p.url, client); code != 403 {
		t.Errorf("client key: %d", code)
	}
	if code, _ := adminPost(t, p.url, "viewer-secret-1", "/api/channels/a/drain"); code != 403 {
		t.Errorf("viewer drain: %d", code)
	}
	if code, _ := adminPost(t, p.url, admin, "/api/channels/nope/drain"); code != 404 {
		t.Errorf("unknown channel: %d", code)
	}
	if code, _ := adminPost(t, p.url, admin, "/api/channels/a/explode"); code != 400 {
		t.Errorf("unknown action: %d", code)
	}
	p.stop(t)
	logs := p.out.String()
	for _, want := range []string{"msg=\"channel drain\" channel=a key_name=ops", "msg=\"channel uneject\" channel=bad key_name=ops", "msg=\"channel enable\" channel=b key_name=ops"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %s:\n%s", want, grepLines(logs, "channel "))
		}
	}
}
