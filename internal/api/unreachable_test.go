package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
)

// unsent is a driver error saying whether the query left the process, as
// PostgreSQL's driver's "conn closed" does (SafeToRetry true: a pooled
// connection already closed by a cut).
type unsent struct{ safe bool }

func (e unsent) Error() string     { return "conn closed" }
func (e unsent) SafeToRetry() bool { return e.safe }

// TestStoreUnreachable: which store failures are the database being out of
// reach (503) rather than the store failing (500). "stats: conn closed"
// was answered 500 after a cut (TestStartDuringDatabaseOutage, now and
// then, depending on whether the pool handed out a connection the cut had
// closed or dialled a new one).
func TestStoreUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("stats: %w", unsent{safe: true}), true},
		{fmt.Errorf("stats: %w", unsent{safe: false}), false},
		{fmt.Errorf("stats: %w", io.ErrUnexpectedEOF), true},
		{errors.New("stats: syntax error"), false},
		{fmt.Errorf("stats: %w", context.DeadlineExceeded), false},
	} {
		if got := storeUnreachable(c.err); got != c.want {
			t.Errorf("storeUnreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
