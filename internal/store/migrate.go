package store

import "strings"

// SplitSQL splits a migration into statements: it drops "--" comment lines
// and cuts at semicolons. The migrations are plain DDL with no semicolon
// inside a literal, and running one statement per Exec works the same on
// both drivers.
func SplitSQL(src string) []string {
	var b strings.Builder
	for line := range strings.Lines(src) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
	}
	var stmts []string
	for s := range strings.SplitSeq(b.String(), ";") {
		if s = strings.TrimSpace(s); s != "" {
			stmts = append(stmts, s)
		}
	}
	return stmts
}
