package frontdoor

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// cutFirstGCRA loses the reply of the first limiter call that ran: the
// GCRA script's answer, not its NOSCRIPT refusal (an error reply).
type cutFirstGCRA struct{ cut atomic.Bool }

func (*cutFirstGCRA) Request([]byte) time.Duration { return 0 }

func (p *cutFirstGCRA) Reply(chunk, last []byte) (time.Duration, bool) {
	if !bytes.HasPrefix(chunk, []byte("-")) && bytes.Contains(last, []byte("frontdoor:{buyer:bot}")) {
		return 0, p.cut.CompareAndSwap(false, true)
	}
	return 0, false
}

// The doc table's rows: a limiter call whose reply is lost, or that runs
// twice, spends a token more; the limit only gets stricter.
func TestRedisLimiterCallLostOrRunTwice(t *testing.T) {
	for _, tc := range []struct {
		name       string
		retries    int
		wantErr    bool
		admitLater int // of the buyer's burst of 3, after the faulted call
	}{
		{"reply lost", -1, true, 2},
		{"run twice", 3, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			proxy, err := faultproxy.Start(srv.Addr, &cutFirstGCRA{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(proxy.Close)
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: tc.retries})
			t.Cleanup(func() { _ = rdb.Close() })
			l := must(New(Redis, Limits{PerBuyer: slow(3)}, rdb))
			d, err := l.Allow(context.Background(), "bot")
			if (err != nil) != tc.wantErr || (err == nil && !d.Allowed) {
				t.Fatalf("faulted call: %+v, %v; want error %v", d, err, tc.wantErr)
			}
			if ok, _ := admitted(t, l, "bot", 5); ok != tc.admitLater {
				t.Fatalf("admitted %d of 5 after the faulted call, want %d (a fault spends a token more, never fewer)", ok, tc.admitLater)
			}
		})
	}
}
