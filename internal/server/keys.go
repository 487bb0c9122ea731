package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/store"
)

// Keys live in two places. Those of the configuration file come from its
// environment variables and work as long as the file names them. Those made
// by the zero-config gateway's first start and by `ttfx keys` live in the
// store as hashes (store.KeyStore), and every gateway on that store polls
// them, so a key made or revoked on one machine works or stops working on
// every replica within DefaultKeyPoll.

// DefaultKeyPoll is how often a gateway reads the stored keys.
const DefaultKeyPoll = 2 * time.Second

// DefaultRotateGrace is how long a rotated key keeps working by default.
const DefaultRotateGrace = 24 * time.Hour

// Generated is a key made now; its secret is shown once.
type Generated struct {
	Name   string
	Role   auth.Role
	Group  string
	Secret string
}

// Env is the environment variable the key is printed for: TTFX_ADMIN_KEY
// for "admin" (the variable `ttfx requests` reads), TTFX_TEAM_A_KEY for
// "team-a".
func (g Generated) Env() string { return EnvName(g.Name) }

// EnvName is the environment variable of a key's name (see Generated.Env).
func EnvName(name string) string {
	b := []byte("TTFX_")
	for _, c := range strings.ToUpper(name) {
		if c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
			b = append(b, byte(c))
		} else {
			b = append(b, '_')
		}
	}
	return string(b) + "_KEY"
}

// Export is the shell line that sets the key's variable.
func (g Generated) Export() string { return "export " + g.Env() + "=" + g.Secret }

// WriteKeys prints the keys made on this start, once, as shell lines (only
// their hashes are kept); and which older keys the store holds and how to get
// a secret for one, since no start can show an old secret again. keysCmd is
// how the reader runs `ttfx keys` against this gateway's store.
func (s *Server) WriteKeys(w io.Writer, keysCmd string) {
	if len(s.generated) > 0 {
		fmt.Fprintf(w, "new keys, shown once (only their hashes are kept, in %s):\n", s.StoreDSN())
		for _, k := range s.generated {
			fmt.Fprintln(w, k.Export())
		}
	}
	var old []string
	for _, n := range s.storedKeys {
		if !slices.ContainsFunc(s.generated, func(g Generated) bool { return g.Name == n }) {
			old = append(old, n)
		}
	}
	if len(old) > 0 {
		// The reader of this line has no secret for these keys (a
		// demo's, an earlier start's): show the one command that gives
		// a working one, as an export line for this shell.
		pick := old[0]
		if slices.Contains(old, "client") {
			pick = "client"
		}
		fmt.Fprintf(w, "keys already in the store: %s. Their secrets were shown once, when they were made (by `ttfx demo` or an earlier start), and are not kept.\n", strings.Join(old, ", "))
		fmt.Fprintf(w, "for a working secret now, rotate a key and set its variable in this shell (its old secret keeps working for 24h):\n")
		fmt.Fprintf(w, "  eval \"$(%s rotate %s)\"    # sets %s\n", keysCmd, pick, EnvName(pick))
		fmt.Fprintf(w, "likewise `%s rotate NAME` for %s; `%s new --name N --role admin|client|viewer [--group G]` makes another.\n",
			keysCmd, strings.Join(old, ", "), keysCmd)
	}
}

// keyStore returns the store's keys. A store that keeps none (ClickHouse)
// has the configuration's keys only.
func keyStore(st store.Store) (store.KeyStore, error) {
	if ks, ok := st.(store.KeyStore); ok {
		return ks, nil
	}
	return noKeys{engine: st.Engine()}, nil
}

// noKeys is the KeyStore of a store that keeps no keys: it lists none and
// refuses to make any.
type noKeys struct{ engine string }

func (noKeys) ListKeys(context.Context) ([]store.KeyRow, error) { return nil, nil }

func (n noKeys) ChangeKeys(context.Context, store.KeyChange) (store.KeyResult, error) {
	return store.KeyResult{}, fmt.Errorf("the %s store keeps no API keys: give them in the configuration's keys", n.engine)
}

// MaxKeyName bounds a key's name: it reaches records, logs and labels.
const MaxKeyName = 64

// checkKeyName refuses names that would not read well as a record's
// key_name or an environment variable's part.
func checkKeyName(name string) error {
	if name == "" {
		return errors.New("a key needs a name (--name)")
	}
	if len(name) > MaxKeyName {
		return fmt.Errorf("key name %.20q… is longer than %d bytes", name, MaxKeyName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("key name %q: use letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}

// NewKey makes a key of the given name, role and group in the store. It is
// refused when a live key has the name, in the store or in reserved (the
// configuration file's names).
func NewKey(ctx context.Context, st store.Store, name, role, group string, reserved []string) (Generated, error) {
	if err := checkKeyName(name); err != nil {
		return Generated{}, err
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		return Generated{}, err
	}
	if r == auth.RoleViewer && group == "" {
		return Generated{}, errors.New("a viewer key needs a group (--group); an admin key reads everything")
	}
	if len(group) > MaxKeyName {
		return Generated{}, fmt.Errorf("group is longer than %d bytes", MaxKeyName)
	}
	if slices.Contains(reserved, name) {
		return Generated{}, fmt.Errorf("the configuration file has a key named %q", name)
	}
	ks, err := keyStore(st)
	if err != nil {
		return Generated{}, err
	}
	g := Generated{Name: name, Role: r, Group: group, Secret: auth.NewKey("ttfx-" + string(r) + "-")}
	if _, err := ks.ChangeKeys(ctx, store.KeyChange{Add: []store.KeyRow{g.row()}}); err != nil {
		if errors.Is(err, store.ErrKeyExists) {
			return Generated{}, fmt.Errorf("a key named %q exists: `ttfx keys rotate %s` gives it a new secret", name, name)
		}
		return Generated{}, err
	}
	return g, nil
}

// RotateKey gives the stored key name a new secret; the old one keeps
// working until now+grace.
func RotateKey(ctx context.Context, st store.Store, name string, grace time.Duration) (Generated, error) {
	ks, err := keyStore(st)
	if err != nil {
		return Generated{}, err
	}
	cur, err := liveKey(ctx, ks, name)
	if err != nil {
		return Generated{}, err
	}
	g := Generated{Name: name, Role: auth.Role(cur.Role), Group: cur.Group, Secret: auth.NewKey("ttfx-" + cur.Role + "-")}
	if _, err := ks.ChangeKeys(ctx, store.KeyChange{End: name, EndAt: time.Now().Add(grace), Add: []store.KeyRow{g.row()}}); err != nil {
		return Generated{}, err
	}
	return g, nil
}

// RevokeKey stops the stored key name from working (every secret of it,
// one in a rotation's grace period included); it returns how many ended.
func RevokeKey(ctx context.Context, st store.Store, name string) (int, error) {
	ks, err := keyStore(st)
	if err != nil {
		return 0, err
	}
	r, err := ks.ChangeKeys(ctx, store.KeyChange{End: name, EndAt: time.Now()})
	if errors.Is(err, store.ErrKeyNotFound) {
		return 0, fmt.Errorf("no live key named %q in the store (`ttfx keys list` shows them; keys of the configuration file are removed there)", name)
	}
	return r.Ended, err
}

// ListKeys returns the stored keys, ended ones included.
func ListKeys(ctx context.Context, st store.Store) ([]store.KeyRow, error) {
	ks, err := keyStore(st)
	if err != nil {
		return nil, err
	}
	return ks.ListKeys(ctx)
}

// liveKey returns the newest live key of name.
func liveKey(ctx context.Context, ks store.KeyStore, name string) (store.KeyRow, error) {
	rows, err := ks.ListKeys(ctx)
	if err != nil {
		return store.KeyRow{}, err
	}
	now := time.Now()
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Name == name && rows[i].Live(now) {
			return rows[i], nil
		}
	}
	return store.KeyRow{}, fmt.Errorf("no live key named %q in the store (`ttfx keys list` shows them)", name)
}

func (g Generated) row() store.KeyRow {
	return store.KeyRow{Hash: auth.HashKey(g.Secret).String(), Name: g.Name, Role: string(g.Role), Group: g.Group}
}

// firstKeys are the zero-config gateway's keys, made on its first start.
func firstKeys() []Generated {
	return []Generated{
		{Name: "admin", Role: auth.RoleAdmin, Secret: auth.NewKey("ttfx-admin-")},
		{Name: "client", Role: auth.RoleClient, Group: "default", Secret: auth.NewKey("ttfx-client-")},
		{Name: "viewer", Role: auth.RoleViewer, Group: "default", Secret: auth.NewKey("ttfx-viewer-")},
	}
}

// makeKeys makes the zero-config gateway's first keys when the store has
// none, and extra (the demo's), each replacing a live key of its name. It
// returns the keys it made.
func makeKeys(ctx context.Context, ks store.KeyStore, zero bool, extra []Generated) ([]Generated, error) {
	var made []Generated
	if zero {
		first := firstKeys()
		rows := make([]store.KeyRow, len(first))
		for i, g := range first {
			rows[i] = g.row()
		}
		r, err := ks.ChangeKeys(ctx, store.KeyChange{Add: rows, OnlyIfEmpty: true})
		if err != nil {
			return nil, err
		}
		if r.Added > 0 {
			made = first
		}
	}
	for _, g := range extra {
		c := store.KeyChange{End: g.Name, EndAt: time.Now(), Add: []store.KeyRow{g.row()}}
		_, err := ks.ChangeKeys(ctx, c)
		if errors.Is(err, store.ErrKeyNotFound) {
			c.End = ""
			_, err = ks.ChangeKeys(ctx, c)
		}
		if err != nil {
			return nil, err
		}
		made = append(made, g)
	}
	return made, nil
}

// keyEntries are the configuration's keys and the stored keys live at now.
func keyEntries(cfgKeys []auth.Entry, rows []store.KeyRow, now time.Time) (entries []auth.Entry, stored []string) {
	entries = append(entries, cfgKeys...)
	for _, k := range rows {
		if !k.Live(now) {
			continue
		}
		role, err := auth.ParseRole(k.Role)
		if err != nil {
			continue
		}
		h, err := auth.ParseHash(k.Hash)
		if err != nil {
			continue
		}
		entries = append(entries, auth.Entry{Principal: auth.Principal{Name: k.Name, Role: role, Group: k.Group}, Hash: h})
		if !slices.Contains(stored, k.Name) {
			stored = append(stored, k.Name)
		}
	}
	return entries, stored
}

// pollKeys reloads the stored keys every interval until ctx ends. A failed
// read keeps the keys it had: a database outage must not lock everyone out.
func (s *Server) pollKeys(ctx context.Context, ks store.KeyStore, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		rows, err := ks.ListKeys(rctx)
		cancel()
		if err != nil {
			if !failing && ctx.Err() == nil {
				s.log.Warn("read keys from the store; keeping the keys read before", "err", err)
			}
			failing = true
			continue
		}
		failing = false
		s.keysMu.Lock()
		s.storedRows = rows
		entries, _ := keyEntries(s.configEntries, rows, time.Now())
		s.keys.Set(entries)
		s.keysMu.Unlock()
	}
}

// configKeys returns the entries of a configuration file's keys.
func configKeys(keys []config.Key) ([]auth.Entry, error) {
	var entries []auth.Entry
	for _, k := range keys {
		role, err := auth.ParseRole(k.Role)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.Name, err)
		}
		entries = append(entries, auth.Entry{Principal: auth.Principal{Name: k.Name, Role: role, Group: k.Group}, Hash: auth.HashKey(k.Secret)})
	}
	return entries, nil
}

// legacyKeyFile is the keys file of gateways before keys moved into the
// store: the zero-config keys' hashes and the key of the user-id hash.
type legacyKeyFile struct {
	Keys []struct {
		Name  string `json:"name"`
		Role  string `json:"role"`
		Group string `json:"group,omitempty"`
		Hash  string `json:"sha256"`
	} `json:"keys"`
	UserHashKey string `json:"user_hash_key"`
}

// readLegacyKeys reads a ttfx.keys.json left by an earlier version: its
// keys go into an empty store, so they keep working, and its user-hash key
// stays in use, so user ids hash as before. ok is false when there is none.
func readLegacyKeys(path string) (rows []store.KeyRow, userKey []byte, ok bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("read keys: %w", err)
	}
	var kf legacyKeyFile
	if err := json.Unmarshal(b, &kf); err != nil {
		return nil, nil, false, fmt.Errorf("read keys %s: %w", path, err)
	}
	for _, k := range kf.Keys {
		rows = append(rows, store.KeyRow{Hash: k.Hash, Name: k.Name, Role: k.Role, Group: k.Group})
	}
	userKey, err = hex.DecodeString(kf.UserHashKey)
	if err != nil || len(userKey) < 16 {
		return nil, nil, false, fmt.Errorf("keys %s: invalid user_hash_key", path)
	}
	return rows, userKey, true, nil
}

// loadOrCreateSecret reads a hex secret from path, or makes a random one and
// keeps it there (mode 0600).
func loadOrCreateSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(k) < 16 {
			return nil, fmt.Errorf("read %s: not a hex key of 16 bytes or more", path)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	k := make([]byte, 32)
	rand.Read(k)
	if err := os.WriteFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	return k, nil
}
