package inventory

import (
	"context"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
)

// One-per-user-lua's script and the give-back, each run twice for one sale
// (a reply lost and the call sent again): the second run takes and gives
// back nothing more, and another buyer's or another sale's run is not
// mistaken for it.
func TestOnePerUserScriptsRunTwiceTakeOnce(t *testing.T) {
	ctx := context.Background()
	s := &store{rdb: redistest.Start(t).Client(t), stage: "one-per-user-lua"}
	if err := s.reset(ctx, "sku-1", 10, true); err != nil {
		t.Fatal(err)
	}
	k := s.keys("sku-1")
	deduct := func(user, id string) int64 {
		t.Helper()
		n, err := s.run(ctx, onePerUserScript, []string{k.stock(), k.sold(), k.buyers()}, 1, user, id).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	giveBack := func(user, id string) int64 {
		t.Helper()
		n, err := s.run(ctx, giveBackScript, []string{k.stock(), k.sold(), k.buyers(), k.givenBack()}, 1, user, id).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, step := range []struct {
		run       func(user, id string) int64
		user, id  string
		want      int64
		wantStock int64
	}{
		{deduct, "alice", "o1", 9, 9},
		{deduct, "alice", "o1", 9, 9},  // the same sale again: no second unit
		{deduct, "alice", "o2", -3, 9}, // alice's next sale: already bought
		{giveBack, "alice", "o1", 1, 10},
		{giveBack, "alice", "o1", 0, 10}, // given back once
		{deduct, "alice", "o3", 9, 9},    // her place is free again
	} {
		if got := step.run(step.user, step.id); got != step.want {
			t.Fatalf("step %d (%s, %s): %d, want %d", i, step.user, step.id, got, step.want)
		}
		if stock, err := s.stock(ctx, "sku-1"); err != nil || stock != step.wantStock {
			t.Fatalf("step %d: stock %d (%v), want %d", i, stock, err, step.wantStock)
		}
	}
}
