package server

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/route"
	"github.com/ttfx/ttfx/internal/store"
)

// Operators' channel states reach every gateway sharing a store the way
// keys do (keys.go): an action is applied here at once and written to the
// store (store.ChannelStateStore); every gateway reads the newest states
// every KeyPoll, applies those newer than its own, and records that it did,
// so that GET /api/channels can say which replicas applied a state. A store
// that keeps none (a test's) leaves the states to this gateway.

// localAcks records when this gateway applied each channel's operator
// state: the replica list when the store's cannot be read.
type localAcks struct {
	mu sync.Mutex
	at map[string]time.Time // channel → applied
}

// channelStates returns the store's channel states, or nil.
func (s *Server) channelStates() store.ChannelStateStore {
	cs, _ := s.store.(store.ChannelStateStore)
	return cs
}

// publishChannelState writes an operator's state to the store for the
// other replicas; it returns the state as this gateway applies it. A store
// that cannot take it leaves the state to this gateway (logged).
func (s *Server) publishChannelState(ctx context.Context, name string, rec route.OpRecord) route.OpRecord {
	rec.Version = rec.At.UnixNano()
	cs := s.channelStates()
	if cs == nil {
		return rec
	}
	st, err := cs.SetChannelState(ctx, store.ChannelState{Channel: name, State: rec.State.String(), By: rec.By, At: rec.At})
	if err != nil {
		s.log.Warn("channel state: the store could not take it; applied on this gateway only", "channel", name, "err", err)
		return rec
	}
	rec.Version, rec.At = st.Version, st.At
	return rec
}

// noteApplied records that this gateway applied rec for the channel name,
// here and in the store.
func (s *Server) noteApplied(name string, rec route.OpRecord) {
	now := time.Now().UTC()
	s.acks.mu.Lock()
	if s.acks.at == nil {
		s.acks.at = map[string]time.Time{}
	}
	s.acks.at[name] = now
	s.acks.mu.Unlock()
	if cs := s.channelStates(); cs != nil && rec.Version != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cs.AckChannelStates(ctx, []store.ChannelAck{{Replica: s.replica, Channel: name, Version: rec.Version, At: now}}); err != nil && !errors.Is(err, context.Canceled) {
			s.log.Warn("channel state: could not record that this replica applied it", "channel", name, "err", err)
		}
	}
}

// replicaAcks returns, per channel, the replicas that applied its current
// operator state.
func (s *Server) replicaAcks(ctx context.Context) map[string][]ReplicaAck {
	out := map[string][]ReplicaAck{}
	if cs := s.channelStates(); cs != nil {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		acks, err := cs.ChannelAcks(rctx)
		cancel()
		if err == nil {
			for _, a := range acks {
				if op := s.router.Op(a.Channel); op.Version != 0 && a.Version == op.Version {
					out[a.Channel] = append(out[a.Channel], ReplicaAck{Replica: a.Replica, AppliedAt: a.At.UTC(), Self: a.Replica == s.replica})
				}
			}
			return out
		}
	}
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	for ch, at := range s.acks.at {
		out[ch] = []ReplicaAck{{Replica: s.replica, AppliedAt: at, Self: true}}
	}
	return out
}

// applyChannelStates applies the store's states newer than this
// gateway's, and records it.
func (s *Server) applyChannelStates(ctx context.Context, cs store.ChannelStateStore) error {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	states, err := cs.ChannelStates(rctx)
	cancel()
	if err != nil {
		return err
	}
	for _, st := range states {
		if st.Version <= s.router.Op(st.Channel).Version {
			continue
		}
		op, err := route.ParseOpState(st.State)
		if err != nil {
			continue // a newer gateway's state this one does not know
		}
		rec := route.OpRecord{State: op, By: st.By, At: st.At, Version: st.Version}
		s.router.SetOp(st.Channel, rec)
		s.noteApplied(st.Channel, rec)
		s.log.Info("channel state from the store applied", "channel", st.Channel, "state", st.State, "key_name", st.By)
	}
	return nil
}

// pollChannelStates applies the store's channel states every interval
// until ctx ends. A failed read keeps the states in force.
func (s *Server) pollChannelStates(ctx context.Context, cs store.ChannelStateStore, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.applyChannelStates(ctx, cs); err != nil {
			if !failing && ctx.Err() == nil {
				s.log.Warn("read channel states from the store; keeping those in force", "err", err)
			}
			failing = true
			continue
		}
		failing = false
	}
}
