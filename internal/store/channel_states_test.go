package store_test

import (
	"testing"
	"time"

	"github.com/ttfx/ttfx/internal/store"
	"github.com/ttfx/ttfx/internal/store/storetest"
)

// TestChannelStates: on every engine, the newest state of each channel is
// in force, versions grow even for states set in the same nanosecond, and
// a replica's ack is replaced by its newer one.
func TestChannelStates(t *testing.T) {
	storetest.ForEachEngine(t, func(t *testing.T, s store.Store) {
		cs := s.(store.ChannelStateStore)
		ctx := storetest.Ctx(t)
		at := time.Now()
		a1, err := cs.SetChannelState(ctx, store.ChannelState{Channel: "a", State: "drained", By: "ops", At: at})
		if err != nil {
			t.Fatal(err)
		}
		a2, err := cs.SetChannelState(ctx, store.ChannelState{Channel: "a", State: "disabled", By: "oncall", At: at})
		if err != nil {
			t.Fatal(err)
		}
		if a2.Version <= a1.Version {
			t.Fatalf("versions %d then %d", a1.Version, a2.Version)
		}
		if _, err := cs.SetChannelState(ctx, store.ChannelState{Channel: "b", State: "serving", By: "ops", At: at}); err != nil {
			t.Fatal(err)
		}
		got, err := cs.ChannelStates(ctx)
		if err != nil || len(got) != 2 || got[0].Channel != "a" || got[0].State != "disabled" || got[0].By != "oncall" || got[0].Version != a2.Version || got[1].State != "serving" {
			t.Fatalf("states %+v %v", got, err)
		}
		if err := cs.AckChannelStates(ctx, []store.ChannelAck{{Replica: "r1", Channel: "a", Version: a1.Version, At: at}, {Replica: "r2", Channel: "a", Version: a2.Version, At: at}}); err != nil {
			t.Fatal(err)
		}
		if err := cs.AckChannelStates(ctx, []store.ChannelAck{{Replica: "r1", Channel: "a", Version: a2.Version, At: at.Add(time.Second)}}); err != nil {
			t.Fatal(err)
		}
		acks, err := cs.ChannelAcks(ctx)
		if err != nil || len(acks) != 2 {
			t.Fatalf("acks %+v %v", acks, err)
		}
		for _, a := range acks {
			if a.Version != a2.Version {
				t.Errorf("ack %+v: want version %d", a, a2.Version)
			}
		}
	})
}
