package lock_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
)

// The tests here open the window an interrupted redis-cli --cluster
// reshard leaves: a lock's slot MIGRATING on its master and IMPORTING on
// another, with some of the slot's keys moved and the slot not handed
// over (issue 24).

// TestACleanupKeepsToTheCallersDeadlineWhileTheSlotMigrates: a FairMutex's
// TryLock with a one-second context, on a held lock whose slot has started
// migrating. Its scripts get TRYAGAIN (three keys, not all on one node) and
// its attempt fails when the context ends; leaving the queue afterwards
// gets TRYAGAIN too, and used to be retried for the whole watchdog timeout
// (TryLock returned after 31 s with the default 30 s).
func TestACleanupKeepsToTheCallersDeadlineWhileTheSlotMigrates(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartCluster(t)
	rdb := cluster.Client(t)
	ctx := within(t, 30*time.Second)
	name := uniqueName(t, "fair-cleanup")
	holder := newLockClient(t, rdb).FairMutex(name)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	other := "{" + name + "}:other"
	if err := rdb.Set(ctx, other, "moved", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m := beginMigration(t, rdb, "{"+name+"}")
	m.moveSome(t, other)
	waiter := newLockClient(t, rdb, lock.WithWatchdogTimeout(10*time.Second)).FairMutex(name)

	tryCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	start := time.Now()
	ok, err := waiter.TryLock(tryCtx, 5*time.Second, 0)
	took := time.Since(start)
	t.Logf("TryLock with a 1 s context: %v, %v after %v", ok, err, took)
	if ok {
		t.Fatal("TryLock took a held lock")
	}
	if took > 2500*time.Millisecond {
		t.Fatalf("TryLock with a 1 s context returned after %v: its cleanup ran past the caller's deadline", took)
	}
}

// moveSome moves keys of the slot to the target, as a reshard moves a
// slot's keys a batch at a time.
func (m *migration) moveSome(t *testing.T, keys ...string) {
	t.Helper()
	host, port, _ := strings.Cut(m.target.Options().Addr, ":")
	args := []any{"migrate", host, port, "", 0, 5000, "keys"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.source.Do(context.Background(), args...).Err(); err != nil {
		t.Fatal(fmt.Errorf("migrate %v: %w", keys, err))
	}
}
