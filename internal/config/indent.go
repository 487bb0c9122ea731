package config

import (
	"bytes"
	"fmt"
	"strings"
)

// misindented finds the first line of a YAML document whose indentation
// matches no block it could belong to, for a syntax error the YAML parser
// places at the line where the enclosing block began (yaml.v3 reports the
// context's line: "line 2: did not find expected '-' indicator" for a
// key three lines further down that is one space short). It reads block
// style only, as configuration files are written; it gives up (ok false)
// at flow collections, block scalars, tabs or anything else it does not
// follow, so the parser's own message stands there.
func misindented(b []byte) (line int, msg string, ok bool) {
	levels := []int{0} // the indentations of the open blocks, innermost last
	opens := false     // the previous line opens a block (ends in ':' or is a bare '-')
	for i, raw := range bytes.Split(b, []byte("\n")) {
		s := strings.TrimRight(string(raw), " \r")
		content := strings.TrimLeft(s, " ")
		if content == "" || strings.HasPrefix(content, "#") || content == "---" {
			continue
		}
		if strings.HasPrefix(content, "\t") || strings.ContainsAny(content[:1], "{[|>\"'") {
			return 0, "", false
		}
		n := len(s) - len(content)
		top := levels[len(levels)-1]
		switch {
		case n > top:
			if !opens {
				return i + 1, fmt.Sprintf("indented %d spaces, deeper than the line above, which opens no block (a value already follows its key)", n), true
			}
			levels = append(levels, n)
		case n < top:
			for len(levels) > 1 && levels[len(levels)-1] > n {
				levels = levels[:len(levels)-1]
			}
			if levels[len(levels)-1] != n {
				return i + 1, fmt.Sprintf("indented %d spaces, which lines up with no key above it (%s): align it with the key it belongs to", n, listLevels(levels, top)), true
			}
		}
		// A list item's own keys sit after "- ": that column is a block
		// of its own.
		item := content
		for strings.HasPrefix(item, "- ") {
			item = strings.TrimLeft(item[2:], " ")
			levels = append(levels, len(s)-len(item))
		}
		body := stripComment(item)
		if strings.ContainsAny(body, "{[|>") && !strings.Contains(body, ": ") && !strings.HasSuffix(body, ":") {
			return 0, "", false
		}
		if _, v, found := strings.Cut(body, ": "); found && strings.ContainsAny(strings.TrimSpace(v)[:min(1, len(strings.TrimSpace(v)))], "|>") {
			return 0, "", false // a block scalar: its lines are text
		}
		opens = strings.HasSuffix(body, ":") || body == "-"
	}
	return 0, "", false
}

// stripComment drops a trailing " # comment" outside quotes.
func stripComment(s string) string {
	inQuote := byte(0)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote != 0:
			if c == inQuote {
				inQuote = 0
			}
		case c == '"' || c == '\'':
			inQuote = c
		case c == '#' && i > 0 && s[i-1] == ' ':
			return strings.TrimRight(s[:i], " ")
		}
	}
	return s
}

// listLevels names the columns a line could have started at.
func listLevels(levels []int, top int) string {
	var cols []string
	for _, l := range levels {
		cols = append(cols, fmt.Sprint(l))
	}
	if top > levels[len(levels)-1] {
		cols = append(cols, fmt.Sprint(top))
	}
	return strings.Join(cols, ", ") + " spaces"
}
