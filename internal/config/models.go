package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Models is a channel's `models`: the model names it serves and, for the
// names its provider knows otherwise (aliases), that name. The file gives
// either a list of names and globs —
//
//	models: ["gpt-4o", "claude-*"]
//
// — or a map from the name clients send to the provider's name, where an
// empty value keeps the name and a * in the value stands for what the
// key's one * matched:
//
//	models:
//	  gpt-4o: prod-gpt4o          # the name of a deployment
//	  gpt-4o-mini: ""             # served under its own name
//	  "claude-*": "eu.claude-*"    # a regional name
//
// A list may mix names with one-entry maps (`[gpt-4o-mini, {gpt-4o:
// prod-gpt4o}]`) where the order should be written as a list. A name
// matches its exact entry first, then the first glob in the file's order.
type Models struct {
	// Patterns are the exact names and globs, in the file's order; empty
	// serves every model.
	Patterns []string
	// Upstream maps a pattern to the provider's name for it; a pattern
	// not in it is served under the name asked. Nil when there are no
	// aliases.
	Upstream map[string]string
}

// ModelList makes a Models of plain names, without aliases.
func ModelList(patterns ...string) Models { return Models{Patterns: patterns} }

// Equal reports whether m and o serve the same names under the same
// provider names, in the same order.
func (m Models) Equal(o Models) bool {
	return slices.Equal(m.Patterns, o.Patterns) && maps.Equal(m.Upstream, o.Upstream)
}

// UnmarshalYAML reads a list of names (each maybe a one-entry map) or a map.
func (m *Models) UnmarshalYAML(n *yaml.Node) error {
	*m = Models{}
	add := func(k, v *yaml.Node) error {
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			return fmt.Errorf("line %d: models: want a model name or glob, not %s", k.Line, nodeKind(k))
		}
		if slices.Contains(m.Patterns, k.Value) {
			return fmt.Errorf("line %d: models: %q is listed twice", k.Line, k.Value)
		}
		m.Patterns = append(m.Patterns, k.Value)
		if v == nil || v.Tag == "!!null" {
			return nil
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: models: %q must map to the provider's model name (a string), not %s", v.Line, k.Value, nodeKind(v))
		}
		if v.Value != "" && v.Value != k.Value {
			if m.Upstream == nil {
				m.Upstream = map[string]string{}
			}
			m.Upstream[k.Value] = v.Value
		}
		return nil
	}
	switch n.Kind {
	case yaml.SequenceNode:
		for _, e := range n.Content {
			if e.Kind == yaml.MappingNode {
				if len(e.Content) != 2 {
					return fmt.Errorf("line %d: models: a list entry that maps a name must hold one name (`- gpt-4o: deployment`), not %d", e.Line, len(e.Content)/2)
				}
				if err := add(e.Content[0], e.Content[1]); err != nil {
					return err
				}
				continue
			}
			if err := add(e, nil); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := add(n.Content[i], n.Content[i+1]); err != nil {
				return err
			}
		}
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return nil
		}
		return fmt.Errorf("line %d: models: want a list of names ([\"gpt-4o\", \"claude-*\"]) or a map of names to the provider's names, not the single value %q", n.Line, n.Value)
	default:
		return fmt.Errorf("line %d: models: want a list or a map, not %s", n.Line, nodeKind(n))
	}
	return nil
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a map"
	case yaml.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!null" {
		return "null"
	}
	return "a value"
}

// validate checks the patterns and the provider names; each error names
// the channel and the entry.
func (m Models) validate(channel string) []error {
	var errs []error
	for _, p := range m.Patterns {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, fmt.Errorf("channel %q: empty model pattern", channel))
			continue
		}
		up, ok := m.Upstream[p]
		if !ok {
			continue
		}
		switch stars := strings.Count(up, "*"); {
		case strings.TrimSpace(up) != up:
			errs = append(errs, fmt.Errorf("channel %q: models: %q maps to %q, which has spaces around it", channel, p, up))
		case strings.ContainsAny(up, "?[]\\"):
			errs = append(errs, fmt.Errorf("channel %q: models: %q maps to %q: a provider's name takes no glob characters but one * (what the key's * matched)", channel, p, up))
		case stars > 1:
			errs = append(errs, fmt.Errorf("channel %q: models: %q maps to %q: at most one * (what the key's * matched)", channel, p, up))
		case stars == 1 && (strings.Count(p, "*") != 1 || strings.Contains(p, "?")):
			errs = append(errs, fmt.Errorf("channel %q: models: %q maps to %q: a * in the provider's name needs exactly one * (and no ?) in the name clients send", channel, p, up))
		case strings.ContainsAny(up, "\x00\r\n\t"):
			errs = append(errs, fmt.Errorf("channel %q: models: %q maps to a name with control characters", channel, p))
		}
	}
	return errs
}
