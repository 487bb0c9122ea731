package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ttfx/ttfx/internal/auth"
	"github.com/ttfx/ttfx/internal/config"
)

// keyFile is the zero-config gateway's keys, kept beside its database: the
// keys' names, roles and SHA-256 hashes (never the keys), and the key of the
// user-id hash. Keys are generated on first start and printed once.
type keyFile struct {
	Keys        []keyEntry `json:"keys"`
	UserHashKey string     `json:"user_hash_key"`
}

type keyEntry struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Group string `json:"group,omitempty"`
	Hash  string `json:"sha256"`
}

// Generated is a key made on this start; its secret is shown once.
type Generated struct {
	Name   string
	Role   auth.Role
	Group  string
	Secret string
}

// loadOrCreateKeys reads path, or creates it with an admin key, a client
// key and a viewer key of group "default" when it does not exist. extra
// keys (the demo's) replace entries of the same name and are added.
func loadOrCreateKeys(path string, extra []Generated) (*auth.Keyring, []byte, []Generated, error) {
	var kf keyFile
	var generated []Generated
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		generated = []Generated{
			{Name: "admin", Role: auth.RoleAdmin, Secret: auth.NewKey("ttfx-admin-")},
			{Name: "client", Role: auth.RoleClient, Group: "default", Secret: auth.NewKey("ttfx-client-")},
			{Name: "viewer", Role: auth.RoleViewer, Group: "default", Secret: auth.NewKey("ttfx-viewer-")},
		}
		var hk [32]byte
		rand.Read(hk[:])
		kf.UserHashKey = hex.EncodeToString(hk[:])
	case err != nil:
		return nil, nil, nil, fmt.Errorf("read keys: %w", err)
	default:
		if err := json.Unmarshal(b, &kf); err != nil {
			return nil, nil, nil, fmt.Errorf("read keys %s: %w", path, err)
		}
	}
	generated = append(generated, extra...)
	for _, g := range generated {
		for i := 0; i < len(kf.Keys); i++ {
			if kf.Keys[i].Name == g.Name {
				kf.Keys = append(kf.Keys[:i], kf.Keys[i+1:]...)
				i--
			}
		}
		kf.Keys = append(kf.Keys, keyEntry{g.Name, string(g.Role), g.Group, auth.HashKey(g.Secret).String()})
	}
	if len(generated) > 0 {
		out, _ := json.MarshalIndent(kf, "", "  ")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, nil, nil, fmt.Errorf("write keys: %w", err)
		}
		if err := os.WriteFile(path, append(out, '\n'), 0o600); err != nil {
			return nil, nil, nil, fmt.Errorf("write keys: %w", err)
		}
	}
	var entries []auth.Entry
	for _, k := range kf.Keys {
		role, err := auth.ParseRole(k.Role)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("keys %s: key %q: %w", path, k.Name, err)
		}
		h, err := auth.ParseHash(k.Hash)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("keys %s: key %q: %w", path, k.Name, err)
		}
		entries = append(entries, auth.Entry{Principal: auth.Principal{Name: k.Name, Role: role, Group: k.Group}, Hash: h})
	}
	hk, err := hex.DecodeString(kf.UserHashKey)
	if err != nil || len(hk) < 16 {
		return nil, nil, nil, fmt.Errorf("keys %s: invalid user_hash_key", path)
	}
	return auth.NewKeyring(entries), hk, generated, nil
}

// configKeys builds the keyring of a configuration file's keys.
func configKeys(keys []config.Key) (*auth.Keyring, error) {
	var entries []auth.Entry
	for _, k := range keys {
		role, err := auth.ParseRole(k.Role)
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", k.Name, err)
		}
		entries = append(entries, auth.Entry{Principal: auth.Principal{Name: k.Name, Role: role, Group: k.Group}, Hash: auth.HashKey(k.Secret)})
	}
	return auth.NewKeyring(entries), nil
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
