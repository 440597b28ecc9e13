package lock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// overlappingReaders keeps the read lock of name held by readers of
// clients, each holding it for readHold and taking it again at once, their
// starts spread over the hold so that every instant is covered by several:
// one reader's gap between its unlock and its next lock, however long a
// loaded machine makes it, is covered by the others.
func overlappingReaders(t *testing.T, ctx context.Context, clients []*Client, name string, stop <-chan struct{}) *sync.WaitGroup {
	t.Helper()
	// Long enough that all four readers are out at once only when a loaded
	// machine stalls one for 225 ms or more (80 ms failed under load ~20).
	const readHold = 300 * time.Millisecond
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			r := c.RWMutex(name).ReadLocker()
			time.Sleep(time.Duration(i) * readHold / time.Duration(len(clients)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if ok, err := r.TryLock(ctx, 50*time.Millisecond, 0); err != nil || !ok {
					continue // held back by the writer: try again
				}
				time.Sleep(readHold)
				_ = r.Unlock(ctx)
			}
		})
	}
	return &wg
}

func TestRWMutexWriterIsNotStarvedByOverlappingReaders(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name         string
		opts         []Option
		writerWithin time.Duration
		wantWriter   bool
	}{
		{"writers first (default)", nil, 2 * time.Second, true},
		{"readers first (Redisson)", []Option{WithReadersFirst()}, time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 10*time.Second)
			name := "rw-starve-" + tc.name
			var readers []*Client
			for range 4 {
				readers = append(readers, newClient(t, srv, tc.opts...))
			}
			stop := make(chan struct{})
			wg := overlappingReaders(t, ctx, readers, name, stop)
			defer wg.Wait()
			defer close(stop)
			time.Sleep(400 * time.Millisecond) // the readers are taking turns
			w := newClient(t, srv, tc.opts...).RWMutex(name).WriteLocker()
			ok, err := w.TryLock(ctx, tc.writerWithin, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.wantWriter {
				t.Fatalf("writer acquired within %v: %t, want %t", tc.writerWithin, ok, tc.wantWriter)
			}
			if ok {
				if err := w.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A reader that holds a level may take another while a writer waits (else
// it would wait for a writer that waits for it), and the writer may read.
func TestRWMutexWaitingWriterDoesNotDeadlockReentrantReaders(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 10*time.Second)
	r := newClient(t, srv).RWMutex("rw-reenter")
	if ok, err := r.ReadLocker().TryLock(ctx, 0, 0); !ok || err != nil {
		t.Fatalf("read lock: %v, %v", ok, err)
	}
	w := newClient(t, srv).RWMutex("rw-reenter")
	writer := make(chan error, 1)
	go func() { writer <- w.WriteLocker().Lock(ctx) }()
	waitFor(t, func() bool { return srv.Client(t).Exists(ctx, ownKey("writers", "{rw-reenter}")).Val() == 1 })
	if ok, err := r.ReadLocker().TryLock(ctx, 0, 0); !ok || err != nil {
		t.Fatalf("reentrant read while a writer waits: %v, %v", ok, err)
	}
	if ok, _ := newClient(t, srv).RWMutex("rw-reenter").ReadLocker().TryLock(ctx, 0, 0); ok {
		t.Fatal("a new reader got in while a writer waits")
	}
	for range 2 {
		if err := r.ReadLocker().Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-writer; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if ok, err := w.ReadLocker().TryLock(ctx, 0, 0); !ok || err != nil {
		t.Fatalf("the writer's own read: %v, %v", ok, err)
	}
	_ = w.ReadLocker().Unlock(ctx)
	_ = w.WriteLocker().Unlock(ctx)
}

// A writer that gives up lets the readers it held back in at once; one that
// died holds them back until its place lapses.
func TestRWMutexWriterThatLeavesOrDiesReleasesReaders(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 10*time.Second)
	const placeTTL = 600 * time.Millisecond

	t.Run("gives up", func(t *testing.T) {
		holder := newClient(t, srv).RWMutex("rw-leave")
		if ok, err := holder.ReadLocker().TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("read lock: %v, %v", ok, err)
		}
		w := newClient(t, srv, WithFairWaiterTimeout(5*time.Second)).RWMutex("rw-leave").WriteLocker()
		if ok, _ := w.TryLock(ctx, 100*time.Millisecond, 0); ok {
			t.Fatal("writer acquired beside a reader")
		}
		if n := rdb.Exists(ctx, ownKey("writers", "{rw-leave}")).Val(); n != 0 {
			t.Fatal("the writer that gave up kept its place")
		}
		if ok, err := newClient(t, srv).RWMutex("rw-leave").ReadLocker().TryLock(ctx, 0, 0); !ok || err != nil {
			t.Fatalf("a reader after the writer gave up: %v, %v", ok, err)
		}
	})

	t.Run("dies", func(t *testing.T) {
		now := rdb.Time(ctx).Val()
		deadline := now.Add(placeTTL).UnixMilli()
		rdb.ZAdd(ctx, ownKey("writers", "{rw-dead}"), redis.Z{Score: float64(deadline), Member: "dead-owner:write"})
		start := time.Now()
		r := newClient(t, srv).RWMutex("rw-dead").ReadLocker()
		if ok, err := r.TryLock(ctx, 3*time.Second, 0); !ok || err != nil {
			t.Fatalf("reader behind a dead writer: %v, %v", ok, err)
		}
		if waited := time.Since(start); waited < placeTTL/2 {
			t.Fatalf("the reader did not wait for the dead writer's place to lapse (%v)", waited)
		}
		_ = r.Unlock(ctx)
	})
}
