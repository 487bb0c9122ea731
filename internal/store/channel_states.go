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
