package server

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/ttfx/ttfx/internal/config"
	"github.com/ttfx/ttfx/internal/wire"
)

// kindStates keeps the channels' Upstreams (wire.Kind.Open) across reloads:
// a channel whose kind configuration did not change keeps its credentials,
// so a reload does not throw cached tokens away and make the next requests
// wait for new ones. Safe for concurrent use.
type kindStates struct {
	mu   sync.Mutex
	open map[string]*wire.Upstream // by fingerprint of what Open read
}

// get returns the Upstream of c, opening it when its configuration is new.
// A kind without Open gives nil.
func (u *kindStates) get(c config.Channel, base *url.URL, keep map[string]*wire.Upstream) (*wire.Upstream, error) {
	k := wire.LookupKind(c.Protocol)
	if k == nil || k.Open == nil {
		return nil, nil
	}
	fp := fingerprint(c)
	u.mu.Lock()
	up, ok := u.open[fp]
	u.mu.Unlock()
	if !ok {
		var err error
		up, err = k.Open(wire.ChannelConfig{Name: c.Name, Base: base, Key: c.Secret, Region: c.Region, Settings: c.Settings, Env: c.SettingsEnv})
		if err != nil {
			return nil, fmt.Errorf("channel %q: %w", c.Name, err)
		}
	}
	keep[fp] = up
	return up, nil
}

// swap keeps only the Upstreams of the latest configuration.
func (u *kindStates) swap(keep map[string]*wire.Upstream) {
	u.mu.Lock()
	u.open = keep
	u.mu.Unlock()
}

// fingerprint is everything Open reads of a channel (secrets included: a
// rotated secret opens new credentials). It stays in memory only.
func fingerprint(c config.Channel) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q %q", c.Name, c.Protocol, c.BaseURL, c.Secret, c.Region)
	for _, k := range slices.Sorted(maps.Keys(c.Settings)) {
		fmt.Fprintf(&b, " %q=%q", k, c.Settings[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.SettingsEnv)) {
		fmt.Fprintf(&b, " %q:%q", k, c.SettingsEnv[k])
	}
	return b.String()
}
