package lock

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// fencedToken takes and releases the fenced lock name on rdb and returns
// its token.
func fencedToken(ctx context.Context, t *testing.T, rdb *redis.Client, name string) int64 {
	t.Helper()
	c := New(rdb)
	defer c.Close()
	m := c.FencedMutex(name)
	if ok, err := m.TryLock(ctx, 0, time.Second); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	token := m.Token()
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return token
}

// A Redis restarted without persistence has lost the fencing counter: the
// next token is larger all the same.
func TestFencedTokensGrowAcrossARestart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := ctxTimeout(t, 20*time.Second)
	before := fencedToken(ctx, t, srv.Client(t), "epoch")
	srv.Restart()
	if after := fencedToken(ctx, t, srv.Client(t), "epoch"); after <= before {
		t.Fatalf("token after a restart without persistence %d, before %d: it went back", after, before)
	}
}

// A replica promoted without the master's last increments of the counter
// hands out larger tokens all the same.
func TestFencedTokensGrowAcrossAFailover(t *testing.T) {
	master := lockservertest.Redis(t)
	ctx := ctxTimeout(t, 30*time.Second)
	replica, err := master.StartReplica(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replica.Stop)
	mrdb := redis.NewClient(&redis.Options{Addr: master.Addr})
	defer mrdb.Close()
	fencedToken(ctx, t, mrdb, "epoch")
	if err := replica.CutOff(ctx, master); err != nil {
		t.Fatal(err)
	}
	var last int64
	for range 3 { // increments the replica never gets
		last = fencedToken(ctx, t, mrdb, "epoch")
	}
	if err := replica.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	rrdb := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer rrdb.Close()
	if after := fencedToken(ctx, t, rrdb, "epoch"); after <= last {
		t.Fatalf("token on the promoted replica %d, the last on the master %d: it went back", after, last)
	}
}
