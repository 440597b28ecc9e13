package lock

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Issue 32, finding 1: an attempt that takes the lock in Redis while its
// Client closes must not strand the hold there for a lease with nobody to
// release it, nor report success with a held context already ended. The
// hook lets the acquisition run in Redis and holds its reply until Close
// has started.
func TestCloseWhileAnAttemptTakesTheLock(t *testing.T) {
	srv := redistest.Start(t)
	for _, kind := range lockKinds {
		t.Run(kind.name, func(t *testing.T) {
			ctx := ctxTimeout(t, 20*time.Second)
			taken, closing := make(chan struct{}), make(chan struct{})
			var armed atomic.Bool
			armed.Store(true)
			rdb := srv.Client(t)
			loadScripts(t, rdb)
			rdb.AddHook(scriptHook{sha: kind.acquire.Hash(), around: func(ctx context.Context, cmd redis.Cmder, next redis.ProcessHook) error {
				err := next(ctx, cmd)
				if armed.Swap(false) {
					close(taken)
					<-closing
				}
				return err
			}})
			c := New(rdb)
			t.Cleanup(func() { _ = c.Close() })
			name := "close-takes-" + kind.name
			l := kind.handle(c, name)
			type result struct {
				held context.Context
				err  error
			}
			done := make(chan result, 1)
			go func() {
				held, err := l.LockContext(ctx)
				done <- result{held, err}
			}()
			<-taken
			closed := make(chan error, 1)
			go func() { closed <- c.Close() }()
			<-c.life.Done() // Close has started
			close(closing)
			if err := <-closed; err != nil {
				t.Fatal(err)
			}
			if res := <-done; res.err == nil {
				t.Fatalf("Lock returned success after Close (held context ended: %v)", context.Cause(res.held))
			} else if !errors.Is(res.err, ErrClosed) {
				t.Fatalf("Lock = %v, want ErrClosed", res.err)
			}
			assertRivalTakes(t, srv, kind, name, "Close")
		})
	}
}
