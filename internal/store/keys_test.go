package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestKeys: keys added, refused under a live name, rotated with a grace
// period and revoked, on both engines; only what KeyRow holds is stored.
func TestKeys(t *testing.T) {
	for _, e := range storetest.SQLEngines() {
		t.Run(e.Name, func(t *testing.T) {
			s, _ := e.Open(t)
			testKeys(t, s)
		})
	}
}

func testKeys(t *testing.T, s store.Store) {
	{
		ks := s.(store.KeyStore)
		ctx := storetest.Ctx(t)
		first := []store.KeyRow{{Hash: "aa", Name: "admin", Role: "admin"}, {Hash: "bb", Name: "client", Role: "client", Group: "default"}}
		if r, err := ks.ChangeKeys(ctx, store.KeyChange{Add: first, OnlyIfEmpty: true}); err != nil || r.Added != 2 {
			t.Fatalf("first keys: %+v %v", r, err)
		}
		// A second first start adds nothing.
		if r, err := ks.ChangeKeys(ctx, store.KeyChange{Add: []store.KeyRow{{Hash: "cc", Name: "admin", Role: "admin"}}, OnlyIfEmpty: true}); err != nil || r.Added != 0 {
			t.Fatalf("second first start: %+v %v", r, err)
		}
		if _, err := ks.ChangeKeys(ctx, store.KeyChange{Add: []store.KeyRow{{Hash: "cc", Name: "client", Role: "client"}}}); !errors.Is(err, store.ErrKeyExists) {
			t.Fatalf("a second live key named client: %v", err)
		}
		// Rotation: the old key works until the grace period ends.
		now := time.Now()
		grace := now.Add(time.Hour)
		if r, err := ks.ChangeKeys(ctx, store.KeyChange{End: "client", EndAt: grace, Add: []store.KeyRow{{Hash: "dd", Name: "client", Role: "client", Group: "default"}}}); err != nil || r.Ended != 1 || r.Added != 1 {
			t.Fatalf("rotate: %+v %v", r, err)
		}
		live := func(at time.Time) map[string]string {
			rows, err := ks.ListKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, k := range rows {
				if k.Live(at) {
					out[k.Hash] = k.Name + "/" + k.Role + "/" + k.Group
				}
			}
			return out
		}
		if got := live(now); len(got) != 3 || got["bb"] != "client/client/default" || got["dd"] != "client/client/default" {
			t.Fatalf("live after rotate: %v", got)
		}
		if got := live(grace.Add(time.Second)); len(got) != 2 || got["bb"] != "" {
			t.Fatalf("live after the grace period: %v", got)
		}
		// Revoking ends every live key of the name at once, the one in
		// its grace period included.
		if r, err := ks.ChangeKeys(ctx, store.KeyChange{End: "client", EndAt: time.Now()}); err != nil || r.Ended != 2 {
			t.Fatalf("revoke: %+v %v", r, err)
		}
		if got := live(time.Now()); len(got) != 1 || got["aa"] != "admin/admin/" {
			t.Fatalf("live after revoke: %v", got)
		}
		if _, err := ks.ChangeKeys(ctx, store.KeyChange{End: "client", EndAt: time.Now()}); !errors.Is(err, store.ErrKeyNotFound) {
			t.Fatalf("revoke twice: %v", err)
		}
		// The name is free again.
		if _, err := ks.ChangeKeys(ctx, store.KeyChange{Add: []store.KeyRow{{Hash: "ee", Name: "client", Role: "client"}}}); err != nil {
			t.Fatal(err)
		}
	}
}
