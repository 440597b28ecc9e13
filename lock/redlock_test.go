package lock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
)

// redLockMasters starts n independent redis-servers and returns their
// servers and fail-fast clients.
func redLockMasters(t *testing.T, n int) ([]*redistest.Server, []*redis.Client) {
	t.Helper()
	servers, clients := make([]*redistest.Server, n), make([]*redis.Client, n)
	for i := range servers {
		servers[i] = redistest.Start(t)
		clients[i] = failFastClient(t, servers[i])
	}
	return servers, clients
}

// redLockOver returns a RedLock on name over one lock of a kind per master,
// and the lock's Redis key.
func redLockOver(t *testing.T, clients []*redis.Client, newLock func(*testing.T, *redis.Client, string) (lock.Locker, string), name string) (lock.Locker, string) {
	locks := make([]lock.Locker, len(clients))
	var key string
	for i, rdb := range clients {
		locks[i], key = newLock(t, rdb, name)
	}
	return lock.NewRedLock(locks...), key
}

func TestRedLockNeedsMajorityOfMasters(t *testing.T) {
	for _, kind := range lockerKinds {
		for _, tc := range []struct {
			up   int
			want bool
		}{{3, true}, {2, true}, {1, false}} {
			t.Run(fmt.Sprintf("%s/%d of 3 up", kind.name, tc.up), func(t *testing.T) {
				servers, clients := redLockMasters(t, 3)
				for _, srv := range servers[tc.up:] {
					srv.Stop()
				}
				live := clients[:tc.up]
				ctx := context.Background()
				red, key := redLockOver(t, clients, kind.new, "order")
				if ok, err := red.TryLock(ctx, 200*time.Millisecond, 0); ok != tc.want || err != nil {
					t.Fatalf("TryLock = %v, %v; want %v, nil", ok, err, tc.want)
				}
				for _, rdb := range live {
					assertKeys(t, rdb, tc.want, key)
				}
				if !tc.want {
					return
				}
				if err := red.Unlock(ctx); err != nil {
					t.Fatalf("Unlock = %v (a master it never got must not fail it)", err)
				}
				for _, rdb := range live {
					assertKeys(t, rdb, false, key)
				}
			})
		}
	}
}

func TestRedLockAgainstOtherOwners(t *testing.T) {
	for _, kind := range lockerKinds {
		for _, tc := range []struct {
			name      string
			heldOn    []int
			want      bool
			freeAfter []int // masters whose key must be gone after TryLock
		}{
			{"minority held elsewhere", []int{0}, true, nil},
			{"majority held elsewhere", []int{0, 1}, false, []int{2}},
		} {
			t.Run(kind.name+"/"+tc.name, func(t *testing.T) {
				_, clients := redLockMasters(t, 3)
				ctx := context.Background()
				for _, i := range tc.heldOn {
					other, _ := kind.new(t, clients[i], "order")
					mustTryLock(t, other)
				}
				red, key := redLockOver(t, clients, kind.new, "order")
				if ok, err := red.TryLock(ctx, 100*time.Millisecond, 0); ok != tc.want || err != nil {
					t.Fatalf("TryLock = %v, %v; want %v, nil", ok, err, tc.want)
				}
				for _, i := range tc.freeAfter {
					assertKeys(t, clients[i], false, key)
				}
				if !tc.want {
					return
				}
				if err := red.Unlock(ctx); err != nil {
					t.Fatalf("Unlock = %v; ErrNotHeld from a master it never got must be ignored", err)
				}
				for i, rdb := range clients {
					assertKeys(t, rdb, i < len(tc.heldOn), key) // the other owner's locks stay
				}
			})
		}
	}
}

// unreachableLocker fails every acquisition while down, like a master that
// cannot be reached.
type unreachableLocker struct {
	lock.Locker
	down bool
}

func (l *unreachableLocker) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if l.down {
		return false, errors.New("unreachable")
	}
	return l.Locker.TryLock(ctx, wait, lease)
}

// A reentrant acquisition may take fewer masters than the one it nests in;
// its Unlock must release only those, or the outer acquisition loses a
// master it still counts on.
func TestRedLockReentrantUnlocksItsOwnMasters(t *testing.T) {
	_, clients := redLockMasters(t, 3)
	ctx := context.Background()
	locks := make([]lock.Locker, len(clients))
	var key string
	for i, rdb := range clients {
		locks[i], key = lockerKinds[1].new(t, rdb, "order") // reentrant Mutex
	}
	master2 := &unreachableLocker{Locker: locks[2]}
	locks[2] = master2
	red := lock.NewRedLock(locks...)

	mustTryLock(t, red) // outer: masters 0, 1 and 2
	master2.down = true
	mustTryLock(t, red) // inner: masters 0 and 1
	master2.down = false

	if err := red.Unlock(ctx); err != nil {
		t.Fatalf("inner Unlock: %v", err)
	}
	for _, rdb := range clients {
		assertKeys(t, rdb, true, key) // the outer acquisition still holds all three
	}
	if err := red.Unlock(ctx); err != nil {
		t.Fatalf("outer Unlock: %v", err)
	}
	for _, rdb := range clients {
		assertKeys(t, rdb, false, key)
	}
}

// A busy master gets a third of the budget (calcLockWaitTime), so RedLock
// moves on to the others, where MultiLock spends the whole budget on it.
func TestRedLockSplitsWaitBudget(t *testing.T) {
	_, clients := redLockMasters(t, 3)
	ctx := context.Background()
	if err := lock.NewTokenLock(clients[0], "order", 10*time.Second).TryLock(ctx); err != nil {
		t.Fatalf("other TryLock on master 0: %v", err)
	}
	const wait = 600 * time.Millisecond
	start := time.Now()
	red, _ := redLockOver(t, clients, lockerKinds[0].new, "order")
	if ok, err := red.TryLock(ctx, wait, 0); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	if elapsed := time.Since(start); elapsed < wait/3-10*time.Millisecond || elapsed > wait*5/6 {
		t.Fatalf("TryLock took %v; want about %v, the busy master's share of %v", elapsed, wait/3, wait)
	}
}

// Each lock takes 20 ms, so a pass over three takes 60 ms: longer than a
// 30 ms lease, whose first lock may have expired by the end of the pass.
func TestCompositeLocksFailWhenLeaseIsSpent(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	ctx := context.Background()
	keys := []string{"x", "y", "z"}
	for name, newLock := range map[string]func(...lock.Locker) lock.Locker{
		"MultiLock": lock.NewMultiLock,
		"RedLock":   lock.NewRedLock,
	} {
		t.Run(name, func(t *testing.T) {
			locks := make([]lock.Locker, len(keys))
			for i, key := range keys {
				locks[i] = slowLocker{newTokenLocker(rdb, key), 20 * time.Millisecond}
			}
			l := newLock(locks...)
			if ok, err := l.TryLock(ctx, 100*time.Millisecond, 30*time.Millisecond); ok || err != nil {
				t.Fatalf("TryLock with a spent lease = %v, %v; want false, nil", ok, err)
			}
			assertKeys(t, rdb, false, keys...)
			// A wait budget a loaded machine's three 20ms locks cannot spend.
			if ok, err := l.TryLock(ctx, 2*time.Second, 5*time.Second); !ok || err != nil {
				t.Fatalf("TryLock with a lease to spare = %v, %v", ok, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			assertKeys(t, rdb, false, keys...)
		})
	}
}

// lostReplyLocker takes the lock but reports a failure, like a reply lost on
// the way back from a master.
type lostReplyLocker struct{ lock.Locker }

func (l lostReplyLocker) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	if ok, err := l.Locker.TryLock(ctx, wait, lease); !ok || err != nil {
		return ok, err
	}
	return false, errors.New("reply lost")
}

// Redlock unlocks every master, also those it believes it did not get.
func TestRedLockUnlocksEverywhere(t *testing.T) {
	_, clients := redLockMasters(t, 3)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		lostOn   int // replies lost on masters [0, lostOn)
		acquires bool
	}{
		{"after acquiring", 1, true},
		{"after failing", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "order:" + tc.name
			locks := make([]lock.Locker, len(clients))
			for i, rdb := range clients {
				locks[i] = newTokenLocker(rdb, key)
				if i < tc.lostOn {
					locks[i] = lostReplyLocker{locks[i]}
				}
			}
			red := lock.NewRedLock(locks...)
			if ok, err := red.TryLock(ctx, 0, 0); ok != tc.acquires || err != nil {
				t.Fatalf("TryLock = %v, %v; want %v, nil", ok, err, tc.acquires)
			}
			if tc.acquires {
				if err := red.Unlock(ctx); err != nil {
					t.Fatalf("Unlock: %v", err)
				}
			}
			for _, rdb := range clients {
				assertKeys(t, rdb, false, key)
			}
		})
	}
}
