package store

import (
	"context"
	"fmt"
	"time"
)

// ChannelState is an operator's state of a channel as the store keeps it
// (migrations/0024_channel_states.sql): the newest row of a channel is
// in force on every gateway sharing the store.
type ChannelState struct {
	Channel string
	State   string // serving | drained | disabled
	By      string // the key name that set it
	At      time.Time
	// Version orders a channel's states: its Unix ns, unique per channel.
	Version int64
}

// ChannelAck says that a replica applied a channel's state of Version.
type ChannelAck struct {
	Replica string
	Channel string
	Version int64
	At      time.Time
}

// ChannelStateStore keeps the operators' channel states and which replica
// applied them. The SQL engines and ClickHouse implement it.
type ChannelStateStore interface {
	// SetChannelState adds a state; its Version is taken from At (made
	// unique and newer than the channel's newest) and returned.
	SetChannelState(ctx context.Context, s ChannelState) (ChannelState, error)
	// ChannelStates returns the newest state of every channel that has one.
	ChannelStates(ctx context.Context) ([]ChannelState, error)
	// AckChannelStates records what replica applied.
	AckChannelStates(ctx context.Context, acks []ChannelAck) error
	// ChannelAcks returns every replica's newest ack per channel.
	ChannelAcks(ctx context.Context) ([]ChannelAck, error)
}

func (s *sqlStore) SetChannelState(ctx context.Context, c ChannelState) (ChannelState, error) {
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

func (s *sqlStore) ChannelStates(ctx context.Context) ([]ChannelState, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT c.channel, c.state, c.set_by, c.set_ns FROM channel_states c
		JOIN (SELECT channel, MAX(set_ns) AS set_ns FROM channel_states GROUP BY channel) n ON n.channel = c.channel AND n.set_ns = c.set_ns
		ORDER BY c.channel`)
	if err != nil {
		return nil, fmt.Errorf("channel states: %w", err)
	}
	defer rows.Close()
	var out []ChannelState
	for rows.Next() {
		var c ChannelState
		if err := rows.Scan(&c.Channel, &c.State, &c.By, &c.Version); err != nil {
			return nil, fmt.Errorf("channel states: %w", err)
		}
		c.At = time.Unix(0, c.Version)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *sqlStore) AckChannelStates(ctx context.Context, acks []ChannelAck) error {
	for _, a := range acks {
		if _, err := s.write.ExecContext(ctx, `INSERT INTO channel_state_acks (replica, channel, set_ns, applied_ns) VALUES ($1, $2, $3, $4)
			ON CONFLICT (replica, channel) DO UPDATE SET set_ns = excluded.set_ns, applied_ns = excluded.applied_ns`,
			a.Replica, a.Channel, a.Version, a.At.UnixNano()); err != nil {
			return fmt.Errorf("ack channel state: %w", err)
		}
	}
	return nil
}

func (s *sqlStore) ChannelAcks(ctx context.Context) ([]ChannelAck, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT replica, channel, set_ns, applied_ns FROM channel_state_acks ORDER BY channel, replica`)
	if err != nil {
		return nil, fmt.Errorf("channel acks: %w", err)
	}
	defer rows.Close()
	var out []ChannelAck
	for rows.Next() {
		var a ChannelAck
		var at int64
		if err := rows.Scan(&a.Replica, &a.Channel, &a.Version, &at); err != nil {
			return nil, fmt.Errorf("channel acks: %w", err)
		}
		a.At = time.Unix(0, at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// ClickHouse has no transactions: two operators acting on one channel in
// the same nanosecond would write two rows of one version, and argMax
// picks one of them on every replica alike.
func (s *chStore) SetChannelState(ctx context.Context, c ChannelState) (ChannelState, error) {
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

func (s *chStore) ChannelStates(ctx context.Context) ([]ChannelState, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT channel, argMax(state, set_ns), argMax(set_by, set_ns), max(set_ns) FROM channel_states GROUP BY channel ORDER BY channel`)
	if err != nil {
		return nil, fmt.Errorf("channel states: %w", err)
	}
	defer rows.Close()
	var out []ChannelState
	for rows.Next() {
		var c ChannelState
		if err := rows.Scan(&c.Channel, &c.State, &c.By, &c.Version); err != nil {
			return nil, fmt.Errorf("channel states: %w", err)
		}
		c.At = time.Unix(0, c.Version)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *chStore) AckChannelStates(ctx context.Context, acks []ChannelAck) error {
	rows := make([][]any, len(acks))
	for i, a := range acks {
		rows[i] = []any{a.Replica, a.Channel, a.Version, a.At.UnixNano()}
	}
	if err := chInsert(ctx, s.write, "channel_state_acks", []string{"replica", "channel", "set_ns", "applied_ns"}, rows); err != nil {
		return fmt.Errorf("ack channel state: %w", err)
	}
	return nil
}

func (s *chStore) ChannelAcks(ctx context.Context) ([]ChannelAck, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT replica, channel, argMax(set_ns, applied_ns), max(applied_ns) FROM channel_state_acks GROUP BY replica, channel ORDER BY channel, replica`)
	if err != nil {
		return nil, fmt.Errorf("channel acks: %w", err)
	}
	defer rows.Close()
	var out []ChannelAck
	for rows.Next() {
		var a ChannelAck
		var at int64
		if err := rows.Scan(&a.Replica, &a.Channel, &a.Version, &at); err != nil {
			return nil, fmt.Errorf("channel acks: %w", err)
		}
		a.At = time.Unix(0, at)
		out = append(out, a)
	}
	return out, rows.Err()
}

// The pending store's channel states are the opened store's: until the
// database is reached they fail with ErrUnavailable, and operators' states
// apply to the gateway that was told.
func (p *pendingStore) channelStates() (ChannelStateStore, error) {
	s, err := p.store()
	if err != nil {
		return nil, err
	}
	cs, ok := s.(ChannelStateStore)
	if !ok {
		return nil, fmt.Errorf("the %s store keeps no channel states", s.Engine())
	}
	return cs, nil
}

func (p *pendingStore) SetChannelState(ctx context.Context, c ChannelState) (ChannelState, error) {
	cs, err := p.channelStates()
	if err != nil {
		return c, err
	}
	return cs.SetChannelState(ctx, c)
}

func (p *pendingStore) ChannelStates(ctx context.Context) ([]ChannelState, error) {
	cs, err := p.channelStates()
	if err != nil {
		return nil, err
	}
	return cs.ChannelStates(ctx)
}

func (p *pendingStore) AckChannelStates(ctx context.Context, acks []ChannelAck) error {
	cs, err := p.channelStates()
	if err != nil {
		return err
	}
	return cs.AckChannelStates(ctx, acks)
}

func (p *pendingStore) ChannelAcks(ctx context.Context) ([]ChannelAck, error) {
	cs, err := p.channelStates()
	if err != nil {
		return nil, err
	}
	return cs.ChannelAcks(ctx)
}
