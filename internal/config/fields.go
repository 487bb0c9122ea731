package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/ttfx/ttfx/internal/wire"
)

// unknownFields walks the YAML document beside the Go type it decodes into
// and returns an error for every key that names no field, by its place in
// the file ("channels[0].modles") with the nearest known name when one is
// close. The YAML decoder's own check stops at the first and names the Go
// type ("field modles not found in type config.Channel"), which a reader of
// the file cannot act on.
func unknownFields(doc *yaml.Node, t reflect.Type) []error {
	var errs []error
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
			return // reads itself (Duration)
		}
		switch {
		case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
			fields := yamlFields(t)
			extra := extraFields(t, n)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				ft, ok := fields[k.Value]
				if !ok && extra[k.Value] != nil {
					continue
				}
				if !ok {
					for name, et := range extra {
						fields[name] = et
					}
					errs = append(errs, unknownField(k, path, fields))
					continue
				}
				walk(v, ft, join(path, k.Value))
			}
		case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
			}
		case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
			for i, v := range n.Content {
				walk(v, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		walk(doc.Content[0], t, "")
	}
	return errs
}

// extraFields are the keys a mapping node n of type t may have besides its
// fields: for a channel, the settings of the kind its protocol names
// (wire.Kind.Settings), which its inline Settings map takes.
func extraFields(t reflect.Type, n *yaml.Node) map[string]reflect.Type {
	if t != reflect.TypeFor[Channel]() {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value != "protocol" {
			continue
		}
		k := wire.LookupKind(n.Content[i+1].Value)
		if k == nil {
			return nil
		}
		out := map[string]reflect.Type{}
		for _, s := range k.Settings {
			out[s.Name] = reflect.TypeFor[string]()
		}
		return out
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the YAML names of t's fields to their types; inline
// structs contribute their fields, "-" fields are not in the file.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			if f.Type.Kind() == reflect.Map {
				continue // takes the keys no field names (see inlineMap)
			}
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func unknownField(k *yaml.Node, path string, fields map[string]reflect.Type) error {
	where := "at the top level"
	if path != "" {
		where = "in " + path
	}
	msg := fmt.Sprintf("line %d: unknown field %q %s", k.Line, k.Value, where)
	if s := nearest(k.Value, fields); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	} else {
		names := make([]string, 0, len(fields))
		for n := range fields {
			names = append(names, n)
		}
		slices.Sort(names)
		msg += " (known: " + strings.Join(names, ", ") + ")"
	}
	return fmt.Errorf("%s", msg)
}

// nearest returns the known name closest to s when it is close enough to be
// a typo: an edit distance of at most a third of its length (at least 1),
// or one name containing the other (key → key_env).
func nearest(s string, fields map[string]reflect.Type) string {
	best, bestD := "", 1<<30
	for n := range fields {
		d := editDistance(strings.ToLower(s), n)
		if d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	if best != "" && (bestD <= max(1, len(s)/3) || strings.Contains(best, s) || strings.Contains(s, best)) {
		return best
	}
	return ""
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment) of two short ASCII names: a swapped pair of letters is one
// typo.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
