package chstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

// ClickHouse has no transactions: two operators acting on one channel in
// the same nanosecond would write two rows of one version, and argMax
// picks one of them on every replica alike.
func (s *chStore) SetChannelState(ctx context.Context, c store.ChannelState) (store.ChannelState, error) {
	var newest int64
	if err := s.read.QueryRowContext(ctx, `SELECT max(set_ns) FROM channel_states WHERE channel = ?`, c.Channel).Scan(&newest); err != nil {
		return c, fmt.Errorf("set channel state: %w", err)
	}
	c.Version = max(c.At.UnixNano(), newest+1)
	if err := chInsert(ctx, s.write, "channel_states", []string{"channel", "state", "set_by", "set_ns"},
		[][]any{{c.Channel, c.State, c.By, c.Version}}); err != nil {
		return c, fmt.Errorf("set channel state: %w", err)
	}
	c.At = time.Unix(0, c.Version)
	return c, nil
}

func (s *chStore) ChannelStates(ctx context.Context) ([]store.ChannelState, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT channel, argMax(state, set_ns), argMax(set_by, set_ns), max(set_ns) FROM channel_states GROUP BY channel ORDER BY channel`)
	if err != nil {
		return nil, fmt.Errorf("channel states: %w", err)
	}
	defer rows.Close()
	var out []store.ChannelState
	for rows.Next() {
		var c store.ChannelState
		if err := rows.Scan(&c.Channel, &c.State, &c.By, &c.Version); err != nil {
			return nil, fmt.Errorf("channel states: %w", err)
		}
		c.At = time.Unix(0, c.Version)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *chStore) AckChannelStates(ctx context.Context, acks []store.ChannelAck) error {
	rows := make([][]any, len(acks))
	for i, a := range acks {
		rows[i] = []any{a.Replica, a.Channel, a.Version, a.At.UnixNano()}
	}
	if err := chInsert(ctx, s.write, "channel_state_acks", []string{"replica", "channel", "set_ns", "applied_ns"}, rows); err != nil {
		return fmt.Errorf("ack channel state: %w", err)
	}
	return nil
}

func (s *chStore) ChannelAcks(ctx context.Context) ([]store.ChannelAck, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT replica, channel, argMax(set_ns, applied_ns), max(applied_ns) FROM channel_state_acks GROUP BY replica, channel ORDER BY channel, replica`)
	if err != nil {
		return nil, fmt.Errorf("channel acks: %w", err)
	}
	defer rows.Close()
	var out []store.ChannelAck
	for rows.Next() {
		var a store.ChannelAck
		var at int64
		if err := rows.Scan(&a.Replica, &a.Channel, &a.Version, &at); err != nil {
			return nil, fmt.Errorf("channel acks: %w", err)
		}
		a.At = time.Unix(0, at)
		out = append(out, a)
	}
	return out, rows.Err()
}
