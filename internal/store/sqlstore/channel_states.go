package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/ttfx/ttfx/internal/store"
)

func (s *sqlStore) SetChannelState(ctx context.Context, c store.ChannelState) (store.ChannelState, error) {
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return c, fmt.Errorf("set channel state: %w", err)
	}
	defer tx.Rollback()
	var newest int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(set_ns), 0) FROM channel_states WHERE channel = $1`, c.Channel).Scan(&newest); err != nil {
		return c, fmt.Errorf("set channel state: %w", err)
	}
	c.Version = max(c.At.UnixNano(), newest+1)
	if _, err := tx.ExecContext(ctx, `INSERT INTO channel_states (channel, state, set_by, set_ns) VALUES ($1, $2, $3, $4)`,
		c.Channel, c.State, c.By, c.Version); err != nil {
		return c, fmt.Errorf("set channel state: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return c, fmt.Errorf("set channel state: %w", err)
	}
	c.At = time.Unix(0, c.Version)
	return c, nil
}

func (s *sqlStore) ChannelStates(ctx context.Context) ([]store.ChannelState, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT c.channel, c.state, c.set_by, c.set_ns FROM channel_states c
		JOIN (SELECT channel, MAX(set_ns) AS set_ns FROM channel_states GROUP BY channel) n ON n.channel = c.channel AND n.set_ns = c.set_ns
		ORDER BY c.channel`)
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

func (s *sqlStore) AckChannelStates(ctx context.Context, acks []store.ChannelAck) error {
	for _, a := range acks {
		if _, err := s.write.ExecContext(ctx, `INSERT INTO channel_state_acks (replica, channel, set_ns, applied_ns) VALUES ($1, $2, $3, $4)
			ON CONFLICT (replica, channel) DO UPDATE SET set_ns = excluded.set_ns, applied_ns = excluded.applied_ns`,
			a.Replica, a.Channel, a.Version, a.At.UnixNano()); err != nil {
			return fmt.Errorf("ack channel state: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) ChannelAcks(ctx context.Context) ([]store.ChannelAck, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT replica, channel, set_ns, applied_ns FROM channel_state_acks ORDER BY channel, replica`)
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
