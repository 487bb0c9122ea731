package server_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/api"
	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/record"
	"github.com/ttfx/ttfx/internal/server"
	"github.com/ttfx/ttfx/internal/sim"
	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/testenv"
)

// start runs a server until the test ends.
func start(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	srv, err := server.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return srv
}

func key(gs []server.Generated, name string) string {
	for _, g := range gs {
		if g.Name == name {
			return g.Secret
		}
	}
	return ""
}

func chat(t *testing.T, base, key, model string, stream bool, extra string) (*http.Response, []byte) {
	t.Helper()
	body := fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hello"}]%s}`, model, stream, extra)
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// readBack waits for the record of id through the read API.
func readBack(t *testing.T, base, key, id string) record.Record {
	t.Helper()
	rec, err := (&api.Client{BaseURL: base, Key: key}).AwaitRequest(context.Background(), id, 10*time.Second)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return rec
}

// TestZeroConfig: keys generated on first start and stored as hashes only,
// the simulator channels, /healthz, and the second start keeping the keys.
func TestZeroConfig(t *testing.T) {
	dir := t.TempDir()
	srv := start(t, server.Options{Dir: dir})
	gen := srv.Generated()
	admin, client := key(gen, "admin"), key(gen, "client")
	if len(gen) != 3 || admin == "" || client == "" || key(gen, "viewer") == "" {
		t.Fatalf("generated keys %+v", gen)
	}
	rows, err := server.ListKeys(context.Background(), srv.Store())
	if err != nil || len(rows) != 3 {
		t.Fatalf("stored keys %+v %v", rows, err)
	}
	for i, g := range gen {
		if rows[i].Hash != auth.HashKey(g.Secret).String() || rows[i].Name != g.Name || rows[i].Role != string(g.Role) {
			t.Fatalf("stored key %+v for %s", rows[i], g.Name)
		}
	}
	// No file anywhere in the directory holds a secret; the user-hash key
	// file is the owner's only.
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, g := range gen {
			if bytes.Contains(b, []byte(g.Secret)) {
				t.Fatalf("%s holds the key %s in plaintext", f, g.Name)
			}
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "ttfx.db.userkey")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("ttfx.db.userkey: %v %v", fi, err)
	}
	resp, err := http.Get(srv.URL() + "/healthz")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("healthz: %v %v", err, resp)
	}
	for _, model := range []string{"fast", "tool-call"} {
		resp, body := chat(t, srv.URL(), client, model, true, "")
		if resp.StatusCode != 200 || !bytes.Contains(body, []byte("[DONE]")) {
			t.Fatalf("%s: %d %.200s", model, resp.StatusCode, body)
		}
		rec := readBack(t, srv.URL(), admin, resp.Header.Get("X-Request-Id"))
		if rec.Status != record.StatusOK || rec.Channel != "sim-openai" || rec.Provider != "sim" || rec.KeyName != "client" {
			t.Fatalf("record %+v", rec)
		}
		// The server times its connections (request_wait_ms) and the
		// relay notes when the headers went out; both survive the store.
		if !rec.RequestWaitMs.Valid() || !rec.HeadersSentMs.Valid() {
			t.Fatalf("request_wait_ms %v, headers_sent_ms %v: want both present", rec.RequestWaitMs, rec.HeadersSentMs)
		}
	}
	// The client key reads its own request, nothing else.
	resp, _ = chat(t, srv.URL(), client, "fast", false, "")
	if rec := readBack(t, srv.URL(), client, resp.Header.Get("X-Request-Id")); rec.Stream {
		t.Fatalf("own record %+v", rec)
	}

	// A second gateway on the same directory keeps the keys, makes none
	// and says which it found.
	srv2 := start(t, server.Options{Dir: dir})
	if len(srv2.Generated()) != 0 {
		t.Fatalf("second start generated %+v", srv2.Generated())
	}
	var out strings.Builder
	srv2.WriteKeys(&out, "ttfx keys")
	if !strings.Contains(out.String(), "keys already in the store: admin, client, viewer") || !strings.Contains(out.String(), `eval "$(ttfx keys rotate client)"    # sets TTFX_CLIENT_KEY`) {
		t.Fatalf("second start says:\n%s", out.String())
	}
	if resp, _ := chat(t, srv2.URL(), client, "fast", true, ""); resp.StatusCode != 200 {
		t.Fatalf("old client key refused: %d", resp.StatusCode)
	}
}

// TestGracefulShutdown: a stream in flight when shutdown begins finishes,
// and its record is written before the server is gone.
func TestGracefulShutdown(t *testing.T) {
	dir := t.TempDir()
	profiles := sim.Builtin()
	profiles["slow"] = sim.Profile{HeadersMs: 50, FirstEventMs: 50, TextMs: sim.Ms(100), VisibleTokens: 60, TPS: 60}
	srv, err := server.New(context.Background(), server.Options{Dir: dir, Listen: "127.0.0.1:0", SimProfiles: profiles})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	client := key(srv.Generated(), "client")
	type result struct {
		resp *http.Response
		body []byte
	}
	got := make(chan result, 1)
	go func() {
		resp, body := chat(t, srv.URL(), client, "slow", true, "")
		got <- result{resp, body}
	}()
	time.Sleep(400 * time.Millisecond)
	shutdownStart := time.Now()
	cancel()
	r := <-got
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if !bytes.HasSuffix(r.body, []byte("data: [DONE]\n\n")) {
		t.Fatalf("stream cut by shutdown: %.200q", r.body[max(0, len(r.body)-200):])
	}
	if time.Since(shutdownStart) < 500*time.Millisecond {
		t.Fatalf("shutdown did not wait for the stream")
	}
	if _, err := http.Get(srv.URL() + "/healthz"); err == nil {
		t.Fatal("still accepting after shutdown")
	}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(dir, "ttfx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Get(context.Background(), r.resp.Header.Get("X-Request-Id"))
	if err != nil || rec.Status != record.StatusOK {
		t.Fatalf("record after shutdown: %v %+v", err, rec)
	}
}

// TestRequestIDEverywhere: every response carries X-Request-Id.
func TestRequestIDEverywhere(t *testing.T) {
	srv := start(t, server.Options{Dir: t.TempDir()})
	for _, path := range []string{"/healthz", "/nope", "/api/requests", "/v1/models"} {
		resp, err := http.Get(srv.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s (%d): no X-Request-Id", path, resp.StatusCode)
		}
	}
}

// configServer starts a configured gateway in front of up, with a store.
func configServer(t *testing.T, storeDSN, upURL string, env map[string]string, logs io.Writer) *server.Server {
	t.Helper()
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: team-a, role: client, group: team-a, key_env: CLIENT}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UPSTREAM, region: eu}
  - {name: up-anthropic, protocol: anthropic, base_url: %q, key_env: UPSTREAM, region: eu}
user_hash_key_env: USER_HASH
log: {level: debug, format: json}
`, storeDSN, upURL, upURL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if logs == nil {
		logs = io.Discard
	}
	return start(t, server.Options{Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// TestCanary sends a request whose prompt, response, client key and user
// id are unique strings; afterwards neither the database nor the logs hold
// any of them (SPEC.md §7).
func TestCanary(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres", "clickhouse"} {
		t.Run(engine, func(t *testing.T) {
			dir := t.TempDir()
			dsn := "sqlite:" + filepath.Join(dir, "canary.db")
			switch engine {
			case "postgres":
				dsn = testenv.PostgresSchema(t)
			case "clickhouse":
				dsn = testenv.ClickHouseDatabase(t)
			}
			canary := func(what string) string { return "CANARY" + what + auth.NewKey("")[:12] }
			prompt, response, clientKey, user := canary("PROMPT"), canary("RESPONSE"), canary("KEY"), canary("USER")
			// A recorded stream whose text is the response canary.
			replay := filepath.Join(dir, "canary.sse")
			chunk := func(delta string) string {
				return `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"canary","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"
			}
			os.WriteFile(replay, []byte(chunk(`{"role":"assistant","content":""}`)+chunk(`{"content":"`+response+`"}`)+
				`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"canary","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n"), 0o644)
			rp, err := sim.ReplayProfile(replay)
			if err != nil {
				t.Fatal(err)
			}
			profiles := sim.Builtin()
			profiles["canary"] = rp
			up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles}))
			defer up.Close()
			logs := &syncBuffer{}
			env := map[string]string{"ADMIN": "admin-key-1", "CLIENT": clientKey, "UPSTREAM": "upstream-1", "USER_HASH": "0123456789abcdef0123"}
			srv := configServer(t, dsn, up.URL, env, logs)

			extra := `,"user":"` + user + `"`
			body := fmt.Sprintf(`{"model":"canary","stream":true,"user":%q,"messages":[{"role":"user","content":%q}]}`, user, prompt)
			req, _ := http.NewRequest("POST", srv.URL()+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+clientKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !bytes.Contains(got, []byte(response)) {
				t.Fatalf("the canary response did not reach the client: %s", got)
			}
			id := resp.Header.Get("X-Request-Id")
			// A non-streaming one, a bad one and an unauthenticated one too.
			chat(t, srv.URL(), clientKey, "fast", false, extra)
			chat(t, srv.URL(), clientKey, "fast", true, `,"bad":`+prompt)
			chat(t, srv.URL(), clientKey+"x", "fast", true, extra)
			rec := readBack(t, srv.URL(), "admin-key-1", id)
			if rec.UserHash == "" || rec.KeyName != "team-a" {
				t.Fatalf("record %+v", rec)
			}
			srv.Shutdown()

			var haystack []byte
			if engine == "sqlite" {
				files, _ := filepath.Glob(filepath.Join(dir, "canary.db*"))
				for _, f := range files {
					b, _ := os.ReadFile(f)
					haystack = append(haystack, b...)
				}
				if len(haystack) == 0 {
					t.Fatal("no database file")
				}
			} else if engine == "clickhouse" {
				haystack = dumpClickHouse(t, dsn)
			} else {
				haystack = dumpPostgres(t, dsn)
			}
			if !bytes.Contains(logs.Bytes(), []byte(id)) {
				t.Errorf("the request is not in the logs: the search looked in the wrong place")
			}
			haystack = append(haystack, logs.Bytes()...)
			for name, c := range map[string]string{"prompt": prompt, "response": response, "client key": clientKey, "user id": user} {
				if bytes.Contains(haystack, []byte(c)) {
					t.Errorf("the %s is stored or logged", name)
				}
			}
			if !bytes.Contains(haystack, []byte(id)) {
				t.Errorf("the request id itself is not in the store: the search looked in the wrong place")
			}
		})
	}
}

// dumpPostgres returns every row of every table of the DSN's schema as text.
func dumpPostgres(t *testing.T, dsn string) []byte {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	if len(tables) == 0 {
		t.Fatal("no tables in the schema")
	}
	var out []byte
	for _, tb := range tables {
		rs, err := db.Query(`SELECT row_to_json(t)::text FROM "` + tb + `" t`)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var s string
			rs.Scan(&s)
			out = append(out, s...)
		}
		rs.Close()
	}
	return out
}

// TestTwoGatewaysOnePostgres: a request relayed by one gateway is readable,
// with its full record and in the stats, from another sharing the database.
func TestTwoGatewaysOnePostgres(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	env := map[string]string{"ADMIN": "admin-key-1", "CLIENT": "client-key-1", "UPSTREAM": "u", "USER_HASH": "0123456789abcdef0123"}
	a := configServer(t, dsn, up.URL, env, nil)
	b := configServer(t, dsn, up.URL, env, nil)
	resp, _ := chat(t, a.URL(), "client-key-1", "fast", true, "")
	id := resp.Header.Get("X-Request-Id")
	rec := readBack(t, b.URL(), "admin-key-1", id)
	if rec.Status != record.StatusOK || !rec.FirstTextDeltaMs.Valid() || rec.Tokens.Visible == nil || len(rec.Attempts) != 1 {
		t.Fatalf("record via the other gateway %+v", rec)
	}
	c := &api.Client{BaseURL: b.URL(), Key: "admin-key-1"}
	st, err := c.Stats(context.Background(), map[string][]string{"group_by": {"model"}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(st)
	if !bytes.Contains(raw, []byte(`"fast"`)) || !bytes.Contains(raw, []byte(`"count":1`)) {
		t.Fatalf("stats via the other gateway: %s", raw)
	}
}

// TestDiagnosisContextScope: the context of a diagnosis summarises only
// records the reader may read: a viewer sees its group's peers, a client
// key its own requests, an admin all of them.
func TestDiagnosisContextScope(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	env := map[string]string{"ADMIN": "admin-k", "A": "client-a-k", "B": "client-b-k", "VA": "viewer-a-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
keys:
  - {name: ops, role: admin, key_env: ADMIN}
  - {name: client-a, role: client, group: team-a, key_env: A}
  - {name: client-b, role: client, group: team-b, key_env: B}
  - {name: viewer-a, role: viewer, group: team-a, key_env: VA}
channels:
  - {name: up, protocol: openai, base_url: %q, key_env: UP}
`, "sqlite:"+filepath.Join(t.TempDir(), "t.db"), up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv := start(t, server.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	for i := 0; i < 5; i++ {
		chat(t, srv.URL(), "client-b-k", "fast", true, "")
	}
	resp, _ := chat(t, srv.URL(), "client-a-k", "fast", true, "")
	id := resp.Header.Get("X-Request-Id")
	readBack(t, srv.URL(), "admin-k", id)
	peers := func(key string) int {
		req, _ := http.NewRequest("GET", srv.URL()+"/api/requests/"+id+"/diagnosis", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("diagnosis for %s: %d, Cache-Control %q", key, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		var rep struct {
			Context struct {
				Peers int `json:"peers"`
			} `json:"context"`
		}
		json.NewDecoder(resp.Body).Decode(&rep)
		return rep.Context.Peers
	}
	// The other group's records are written by now: the admin sees them.
	deadline := time.Now().Add(5 * time.Second)
	for peers("admin-k") != 5 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := peers("admin-k"); n != 5 {
		t.Fatalf("admin sees %d peers, want 5", n)
	}
	if n := peers("viewer-a-k"); n != 0 {
		t.Errorf("a viewer of team-a sees %d peers of team-b", n)
	}
	if n := peers("client-a-k"); n != 0 {
		t.Errorf("client-a sees %d peers of another key", n)
	}
}

// TestShutdownPastDrainTimeout: a stream still running when the drain
// timeout passes ends with the protocol's error event, and is recorded
// before the store closes.
func TestShutdownPastDrainTimeout(t *testing.T) {
	profiles := sim.Builtin()
	profiles["long"] = sim.Profile{HeadersMs: 10, FirstEventMs: 10, TextMs: sim.Ms(20), VisibleTokens: 100, TPS: 20}
	up := httptest.NewServer(sim.New(sim.Options{Profiles: profiles}))
	defer up.Close()
	dir := t.TempDir()
	env := map[string]string{"C": "client-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
drain_timeout: 300ms
keys: [{name: app, role: client, key_env: C}]
channels: [{name: up, protocol: anthropic, base_url: %q, key_env: UP}]
`, "sqlite:"+filepath.Join(dir, "t.db"), up.URL)
	cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(context.Background(), server.Options{Config: cfg, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	req, _ := http.NewRequest("POST", srv.URL()+"/v1/messages", strings.NewReader(`{"model":"long","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"x"}]}`))
	req.Header.Set("X-Api-Key", "client-k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Header.Get("X-Request-Id")
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(resp.Body); got <- b }()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	cancel()
	<-served
	body := <-got
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("shutdown took %v with a 300 ms drain timeout", d)
	}
	if !bytes.Contains(body, []byte("event: error")) {
		t.Fatalf("the cut stream has no error event at its end: %.200q", body[max(0, len(body)-200):])
	}
	st, err := store.Open(context.Background(), cfg.Store)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rec, err := st.Get(context.Background(), id)
	if err != nil || !strings.Contains(rec.Error, "shut down") {
		t.Fatalf("record after shutdown: %v %+v", err, rec)
	}
}

// TestUserHashStable: without user_hash_key_env, a SQLite gateway keeps its
// user-hash key beside the database, so a user hashes alike after a restart.
func TestUserHashStable(t *testing.T) {
	up := httptest.NewServer(sim.New(sim.Options{}))
	defer up.Close()
	dir := t.TempDir()
	env := map[string]string{"ADMIN": "admin-k", "C": "client-k", "UP": "u"}
	y := fmt.Sprintf(`
store: %q
keys: [{name: ops, role: admin, key_env: ADMIN}, {name: app, role: client, key_env: C}]
channels: [{name: up, protocol: openai, base_url: %q, key_env: UP}]
`, "sqlite:"+filepath.Join(dir, "t.db"), up.URL)
	hash := func() string {
		cfg, err := config.Parse([]byte(y), func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		srv, err := server.New(context.Background(), server.Options{Config: cfg, Listen: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx) }()
		defer func() { cancel(); <-done }()
		resp, _ := chat(t, srv.URL(), "client-k", "fast", false, `,"user":"user-42"`)
		return readBack(t, srv.URL(), "admin-k", resp.Header.Get("X-Request-Id")).UserHash
	}
	a, b := hash(), hash()
	if a == "" || a != b {
		t.Fatalf("user hashes %q and %q across a restart", a, b)
	}
}
