package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/ttfx/ttfx/internal/wire"
)

// checkSettings checks a channel's kind settings (the keys of its entry no
// field names) against the keys its kind reads: an unknown key is an error
// naming the nearest known one, as for every other key of the file, and a
// required one must be there.
func checkSettings(ch Channel) []error {
	k := wire.LookupKind(ch.Protocol)
	if k == nil {
		return nil // reported as an unknown kind
	}
	var errs []error
	keys := make([]string, 0, len(ch.Settings))
	for name := range ch.Settings {
		keys = append(keys, name)
	}
	slices.Sort(keys)
	for _, name := range keys {
		if k.Setting(name) != nil {
			continue
		}
		known := yamlFields(reflect.TypeFor[Channel]())
		for _, s := range k.Settings {
			known[s.Name] = nil
		}
		msg := fmt.Sprintf("channel %q: unknown field %q for a channel of kind %s", ch.Name, name, k.Name)
		if s := nearest(name, known); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		} else if len(k.Settings) > 0 {
			msg += " (its own keys: " + settingNames(k) + ")"
		}
		errs = append(errs, fmt.Errorf("%s", msg))
	}
	for _, s := range k.Settings {
		if s.Required && strings.TrimSpace(ch.Settings[s.Name]) == "" {
			errs = append(errs, fmt.Errorf("channel %q: a channel of kind %s needs %s (%s)", ch.Name, k.Name, s.Name, s.Doc))
		}
	}
	return errs
}

func settingNames(k *wire.Kind) string {
	names := make([]string, len(k.Settings))
	for i, s := range k.Settings {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}
