package asyncorders_test

import (
	"context"
	"testing"

	"github.com/lockstep/lockstep/asyncorders"
)

// A consumer group deleted by hand (XGROUP DESTROY) is not "drained":
// without the group nobody will read its entries. Stats said 0
// undelivered and 0 pending, the drain returned at once over three sales
// without orders, and the workers logged NOGROUP forever. Now Stats
// counts every entry of the stream undelivered, and a worker that meets
// NOGROUP creates the group again from the stream's start: the entries
// handled before are read again and find their rows (one order each),
// the others are written.
func TestADeletedGroupIsNotDrainedAndTheWorkersRecreateIt(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	q := e.queue(t, "nogroup", 10)
	destroy := func() {
		t.Helper()
		if err := e.rdb.XGroupDestroy(ctx, q.Stream(sku), asyncorders.Group).Err(); err != nil {
			t.Fatal(err)
		}
	}
	admit(t, q, 3)
	destroy()
	s, err := q.Stats(ctx, sku)
	if err != nil || s.Drained() || s.Undelivered != 3 {
		t.Fatalf("stats without the group: %+v %v; want 3 undelivered, not drained", s, err)
	}
	e.start(t, q, config("w1", asyncorders.Correct))
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Units != 3 {
		t.Fatalf("after the group came back: %+v", inv)
	}
	// Deleted again under a running worker, every entry acknowledged: read
	// again from the start, each finds its row.
	destroy()
	drain(t, q)
	inv := check(t, e, q)
	c, err := e.store.Counts(ctx, "nogroup", sku)
	if err != nil || !inv.Holds || inv.Units != 3 || inv.DeadLetters != 0 || c.Orders != 3 || c.DuplicateBuyers != 0 {
		t.Fatalf("after the second deletion: %+v, %+v %v", inv, c, err)
	}
	admit2 := message("late")
	if _, err := q.Admit(ctx, admit2, true); err != nil {
		t.Fatal(err)
	}
	drain(t, q)
	if inv := check(t, e, q); !inv.Holds || inv.Units != 4 {
		t.Fatalf("a sale after it: %+v", inv)
	}
}
