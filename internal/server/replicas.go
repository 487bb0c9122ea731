package server

import (
	"context"
	"sync"
	"time"

	"github.com/ttfx/ttfx/internal/route"
)

// localAcks records when this gateway applied each channel's operator
// state: the replica list of a gateway without a shared store.
type localAcks struct {
	mu sync.Mutex
	at map[string]time.Time // channel → applied
}

// publishChannelState hands an operator's state to the other replicas;
// it returns the state as this gateway applies it.
func (s *Server) publishChannelState(ctx context.Context, name string, rec route.OpRecord) route.OpRecord {
	return rec
}

// noteApplied records that this gateway applied rec for the channel name.
func (s *Server) noteApplied(name string, rec route.OpRecord) {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	if s.acks.at == nil {
		s.acks.at = map[string]time.Time{}
	}
	s.acks.at[name] = time.Now().UTC()
}

// replicaAcks returns, per channel, the replicas that applied its
// operator's state.
func (s *Server) replicaAcks(ctx context.Context) map[string][]ReplicaAck {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	out := map[string][]ReplicaAck{}
	for ch, at := range s.acks.at {
		out[ch] = []ReplicaAck{{Replica: s.replica, AppliedAt: at, Self: true}}
	}
	return out
}
