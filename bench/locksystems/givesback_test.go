package main

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/redistest"
)

// slowFirstSet holds back the reply of the first SET of the key it names
// past the attempt's deadline: the command ran, its caller never learns.
type slowFirstSet struct {
	key  []byte
	done atomic.Bool
}

func (*slowFirstSet) Request([]byte) time.Duration { return 0 }

func (p *slowFirstSet) Reply(_, last []byte) (time.Duration, bool) {
	if bytes.Contains(bytes.ToLower(last), []byte("set")) && bytes.Contains(last, p.key) && p.done.CompareAndSwap(false, true) {
		return 500 * time.Millisecond, false
	}
	return 0, false
}

// A SET NX PX attempt cut off by its deadline after its command ran gives
// the lock back: left there, it kept the process's next attempts out for a
// whole lease, lease after lease on a loaded machine.
func TestATokenAttemptCutOffGivesTheLockBack(t *testing.T) {
	srv := redistest.Start(t)
	policy := &slowFirstSet{key: []byte("cut-off")}
	proxy, err := faultproxy.Start(srv.Addr, policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	conn := tokenConn{redisConn{redisclient.New(redisclient.Settings{}, proxy.Addr())}, time.Minute} // as newRedisConn's
	t.Cleanup(conn.close)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := conn.lock(ctx, "cut-off"); err == nil {
		t.Fatal("an attempt whose reply came after its deadline took the lock")
	}
	if !policy.done.Load() {
		t.Fatal("the SET's reply was never held back")
	}
	if kept, err := conn.recorded(context.Background(), "cut-off"); kept || err != nil {
		t.Fatalf("the lock's key after the attempt gave up: kept %v, %v; want it given back", kept, err)
	}
}
