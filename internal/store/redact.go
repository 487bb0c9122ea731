package store

import (
	"cmp"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrorMessage is the text of a store error as it may be shown outside the
// gateway's own log (/api/health, the writer's last_error): without the
// database's addresses, host names, user, database name or password. pgx
// names all but the password when a connection fails ("failed to connect
// to `user=… database=…`: 10.0.0.5:5432 (db.internal): …"), and a network
// error names the addresses of both ends; the log keeps the full text for
// the operator.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	// A DSN in the text (open store postgres://…: …) names all of it:
	// it goes whole.
	msg := dsnPattern.ReplaceAllString(err.Error(), "[store]")
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Config != nil {
		c := ce.Config
		msg = strings.ReplaceAll(msg, "failed to connect to `user="+c.User+" database="+c.Database+"`:", "failed to connect to the database:")
		type hostPort struct {
			host string
			port uint16
		}
		hosts := []hostPort{{c.Host, c.Port}}
		for _, f := range c.Fallbacks {
			hosts = append(hosts, hostPort{f.Host, f.Port})
		}
		// Longest first, so that a host that contains another is
		// replaced whole.
		slices.SortFunc(hosts, func(a, b hostPort) int { return cmp.Compare(len(b.host), len(a.host)) })
		for _, h := range hosts {
			if h.host == "" {
				continue
			}
			msg = strings.ReplaceAll(msg, h.host+":"+strconv.Itoa(int(h.port)), "[address]")
			msg = strings.ReplaceAll(msg, h.host, "[host]")
		}
		// The server's own messages quote them: password authentication
		// failed for user "…", database "…" does not exist.
		if c.User != "" {
			msg = strings.ReplaceAll(msg, `"`+c.User+`"`, `"[user]"`)
		}
		if c.Database != "" {
			msg = strings.ReplaceAll(msg, `"`+c.Database+`"`, `"[database]"`)
		}
		// Not the password: pgx never writes it, and replacing its text
		// wherever it occurs would show it inside any name that
		// contains it.
	}
	for _, re := range addressPatterns {
		msg = re.ReplaceAllString(msg, "[address]")
	}
	return msg
}

// dsnPattern matches a server DSN up to the colon that ends it in "open
// store DSN: …".
var dsnPattern = regexp.MustCompile(`\b(postgres|postgresql|clickhouse)://[^\s]*[^\s:]`)

// addressPatterns match IP addresses, with a port or without, as Go's net
// errors write them: 10.0.0.5, 10.0.0.5:5432, [fd00::5]:5432. (An IPv6
// address without brackets is a host given as such, replaced above; a
// pattern for bare ones would also eat times such as 09:26:53.)
var addressPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\[[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(%[0-9A-Za-z]+)?\](:\d+)?`),
	regexp.MustCompile(`\b(\d{1,3}\.){3}\d{1,3}(:\d+)?\b`),
}
