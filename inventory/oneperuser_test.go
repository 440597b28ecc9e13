package inventory

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

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
		res, err := s.run(ctx, onePerUserScript, []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round()}, 1, user, id).Int64Slice()
		if err != nil || len(res) != 2 {
			t.Fatal(res, err)
		}
		return res[0]
	}
	giveBack := func(user, id string) int64 {
		t.Helper()
		n, err := s.run(ctx, giveBackScript, []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round()}, 1, user, id, "buyer").Int64()
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
		{deduct, "alice", "o1", -4, 10},  // a run of o1 arriving late takes nothing
		{giveBack, "bob", "o4", -1, 10},  // o4's script never ran: nothing to give back...
		{deduct, "bob", "o4", -4, 10},    // ...and it never takes anything later
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

// One-per-user-lua's script at the last unit: a sale that finds the stock
// short takes nothing and leaves no buyer behind, so its buyer may buy
// once a unit comes back.
func TestOnePerUserScriptSoldOutTakesNothing(t *testing.T) {
	ctx := context.Background()
	s := &store{rdb: redistest.Start(t).Client(t), stage: "one-per-user-lua"}
	if err := s.reset(ctx, "sku-1", 1, true); err != nil {
		t.Fatal(err)
	}
	k := s.keys("sku-1")
	keys := []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round()}
	deduct := func(user, id string, want, wantStock int64) {
		t.Helper()
		res, err := s.run(ctx, onePerUserScript, keys, 1, user, id).Int64Slice()
		if err != nil || len(res) != 2 || res[0] != want {
			t.Fatalf("%s's sale %s: %v (%v), want %d", user, id, res, err, want)
		}
		if stock, err := s.stock(ctx, "sku-1"); err != nil || stock != wantStock {
			t.Fatalf("after %s's sale %s: stock %d (%v), want %d", user, id, stock, err, wantStock)
		}
	}
	deduct("alice", "o1", 0, 0)
	deduct("bob", "o2", -1, 0) // sold out: nothing taken, bob not recorded
	if n, err := s.run(ctx, giveBackScript, keys, 1, "alice", "o1", "buyer").Int64(); err != nil || n != 1 {
		t.Fatalf("give back alice's o1: %d (%v), want 1", n, err)
	}
	deduct("bob", "o3", 0, 0) // bob buys the unit that came back
}

// The deduction of the guarded one-per-user rungs and its give-back, each
// run twice for one order id, or late: order_deduct.lua records the id in
// the taken set, so a second run takes nothing more, and a give-back by
// that proof returns the units once and fences a run arriving late.
func TestOrderDeductRunTwiceTakesOnce(t *testing.T) {
	ctx := context.Background()
	s := &store{rdb: redistest.Start(t).Client(t), stage: "one-per-user-lock"}
	if err := s.reset(ctx, "sku-1", 2, true); err != nil {
		t.Fatal(err)
	}
	k := s.keys("sku-1")
	deduct := func(id string) int64 {
		t.Helper()
		res, err := s.run(ctx, orderDeductScript, []string{k.stock(), k.sold(), k.round(), k.taken(), k.givenBack()}, 1, id).Int64Slice()
		if err != nil || len(res) != 2 {
			t.Fatal(res, err)
		}
		return res[0]
	}
	giveBack := func(id string) int64 {
		t.Helper()
		n, err := s.run(ctx, giveBackScript, []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round(), k.taken()}, 1, "", id, "taken").Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for i, step := range []struct {
		run       func(id string) int64
		id        string
		want      int64
		wantStock int64
	}{
		{deduct, "o1", 1, 1},
		{deduct, "o1", 1, 1}, // the same sale again: no second unit
		{deduct, "o2", 0, 0},
		{deduct, "o3", -1, 0},   // sold out: o3 took nothing...
		{giveBack, "o3", -1, 0}, // ...so gives nothing back
		{giveBack, "o1", 1, 1},
		{giveBack, "o1", 0, 1},  // given back once
		{deduct, "o1", -4, 1},   // a run of o1 arriving late takes nothing
		{giveBack, "o4", -1, 1}, // o4's script never ran: nothing to give back...
		{deduct, "o4", -4, 1},   // ...and it never takes anything later
		{deduct, "o5", 0, 0},
	} {
		if got := step.run(step.id); got != step.want {
			t.Fatalf("step %d (%s): %d, want %d", i, step.id, got, step.want)
		}
		if stock, err := s.stock(ctx, "sku-1"); err != nil || stock != step.wantStock {
			t.Fatalf("step %d: stock %d (%v), want %d", i, stock, err, step.wantStock)
		}
	}
}

// The give-back of a sale whose units came from a round's stock gives
// nothing back once a reset replaced that stock (the units belonged to it).
func TestAGiveBackOfAnEarlierRoundGivesNothing(t *testing.T) {
	ctx := context.Background()
	s := &store{rdb: redistest.Start(t).Client(t), stage: "one-per-user-lock"}
	k := s.keys("sku-1")
	if err := s.reset(ctx, "sku-1", 10, true, func(p redis.Pipeliner) { p.Incr(ctx, k.round()) }); err != nil {
		t.Fatal(err)
	}
	keys := []string{k.stock(), k.sold(), k.buyers(), k.givenBack(), k.round()}
	for _, step := range []struct {
		id, round string
		want      int64
		wantStock int64
	}{
		{"o1", "0", -1, 10}, // taken before the reset to round 1
		{"o2", "1", 1, 11},
	} {
		n, err := s.run(ctx, giveBackScript, keys, 1, "alice", step.id, step.round).Int64()
		if err != nil || n != step.want {
			t.Fatalf("give back of %s (round %s): %d, %v; want %d", step.id, step.round, n, err, step.want)
		}
		if stock, err := s.stock(ctx, "sku-1"); err != nil || stock != step.wantStock {
			t.Fatalf("after %s: stock %d (%v), want %d", step.id, stock, err, step.wantStock)
		}
	}
}
