package asyncorders_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
)

// The order database stops answering for six seconds (SIGSTOP: every
// insert in flight hangs past its five-second attempt) while sales keep
// coming: the workers back off and retry, an insert that lands late meets
// its retry's row by id, and once the database answers they catch up —
// every sale one order, nothing pending, nothing dead-lettered.
func TestADatabaseOutageLosesAndDoublesNothing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	const sales = 300
	q := e.queue(t, "outage", sales)
	e.start(t, q, config("w1", asyncorders.Correct))
	e.start(t, q, config("w2", asyncorders.Correct))
	pid := e.mariadb.Pid()
	for i := range sales {
		if i == sales/3 {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(6*time.Second, func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
		}
		if _, err := q.Admit(ctx, message(fmt.Sprintf("buyer-%d", i)), true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // six seconds of sales
	}
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := q.Drain(dctx, sku); err != nil {
		t.Fatal(err)
	}
	inv := check(t, e, q)
	c, err := e.store.Counts(ctx, "outage", sku)
	if err != nil || !inv.Holds || inv.Units != sales || inv.DeadLetters != 0 || c.Orders != sales || c.DuplicateBuyers != 0 {
		t.Fatalf("invariant %+v, counts %+v %v", inv, c, err)
	}
	t.Logf("lag p50 %v p99 %v", inv.LagP50, inv.LagP99)
}
