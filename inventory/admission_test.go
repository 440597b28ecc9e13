package inventory_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/faultproxy"
	"github.com/lockstep/lockstep/internal/outcome/outcometest"
	"github.com/lockstep/lockstep/internal/redisclient"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/inventory"
)

// oneLimit is an Admission of one GCRA limit of burst tokens an hour,
// on key.
type oneLimit struct {
	key   string
	burst int
}

func (l oneLimit) LimitKeys() []string { return []string{l.key} }
func (l oneLimit) LimitArgs() []any    { return []any{l.burst, 1, 3600} }
func (l oneLimit) Refused(refusal []any) error {
	return fmt.Errorf("%w: %v", errRefused, refusal)
}

var errRefused = errors.New("refused by the limit")

// atomic's script with the front door's limits in it (admit.lua), for
// each way its one call can end: a refusal sells nothing and spends no
// token; a lost reply may have sold and spent a token (outcome unknown,
// the limit only stricter), as the doc's table says.
func TestAtomicJudgesItsAdmission(t *testing.T) {
	srv := redistest.Start(t)
	direct := srv.Client(t)
	proxied := redis.NewClient(redisclient.Options(redisclient.Settings{}, outcometest.Proxy(t, srv.Addr, outcometest.Replies{Marker: []byte("{buyer:cut}"), Cut: true})))
	t.Cleanup(func() { _ = proxied.Close() })
	inv := newOrderInventory(t, proxied, nil, "r0")
	ctx := context.Background()
	if err := inv.Reset(ctx, "atomic", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	sell := func(l oneLimit) error {
		_, err := inv.DeductFor(inventory.WithAdmission(ctx, l), "atomic", "sku-1", "", 1)
		return err
	}
	stock := func() int64 { return must(direct.Get(ctx, "lockstep:atomic:{sku-1}:stock").Int64()) }
	warm := oneLimit{"rate:{buyer:warm}", 1}
	if err := sell(warm); err != nil { // loads the script, spends warm's one token
		t.Fatalf("admitted sale: %v", err)
	}
	if err := sell(warm); !errors.Is(err, errRefused) {
		t.Fatalf("sale past the limit: %v, want the admission's refusal", err)
	}
	if got := stock(); got != 9 {
		t.Fatalf("stock %d after one sale and one refusal, want 9", got)
	}
	cut := oneLimit{"rate:{buyer:cut}", 5}
	if err := sell(cut); !errors.Is(err, inventory.ErrOutcomeUnknown) {
		t.Fatalf("sale whose reply was lost: %v, want ErrOutcomeUnknown", err)
	}
	if got, spent := stock(), must(direct.Exists(ctx, cut.key).Result()); got != 8 || spent != 1 {
		t.Fatalf("after the lost reply: stock %d, limit key %d; want 8 and 1 (it ran: sold, token spent)", got, spent)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// admissionFault is a proxy policy for one buyer's limit key: it loses
// the reply of the first script run that carries it, or holds back the
// first request that carries it.
type admissionFault struct {
	marker   []byte
	cutReply bool
	hold     time.Duration
	done     atomic.Bool
}

func (f *admissionFault) Request(chunk []byte) time.Duration {
	if f.hold > 0 && bytes.Contains(chunk, f.marker) && f.done.CompareAndSwap(false, true) {
		return f.hold
	}
	return 0
}

func (f *admissionFault) Reply(chunk, last []byte) (time.Duration, bool) {
	// The script's answer, not a NOSCRIPT refusal (an error reply).
	return 0, f.cutReply && !bytes.HasPrefix(chunk, []byte("-")) && bytes.Contains(last, f.marker) && f.done.CompareAndSwap(false, true)
}

// The doc table's other two rows for atomic's script with the front
// door's limits in it (internal/frontdoor/doc.go): run twice by a client
// that sends a command again after its reply was lost (the shop's never
// do), it sells two units and spends two tokens; arriving late, after a
// request of the same buyer sent later, it is judged at Redis's clock:
// the later one took the buyer's one token and sold, the late one is
// refused and sells nothing.
func TestAtomicAdmissionRunTwiceOrLate(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		fault *admissionFault
		// retries is the client's MaxRetries: 3 sends a command whose
		// reply was lost again.
		retries int
		limit   oneLimit
		// sales are sent one after the other, 50 ms apart, each in its
		// own goroutine (a pool connection each).
		sales     int
		wantSold  int
		wantStock int64
		// tokensLeft of the limit after the sales: sales admitted now.
		tokensLeft int
	}{
		{name: "run twice", fault: &admissionFault{marker: []byte("{buyer:twice}"), cutReply: true}, retries: 3,
			limit: oneLimit{"rate:{buyer:twice}", 5}, sales: 1, wantSold: 1, wantStock: 7, tokensLeft: 3},
		{name: "arrives late", fault: &admissionFault{marker: []byte("{buyer:late}"), hold: 300 * time.Millisecond}, retries: -1,
			limit: oneLimit{"rate:{buyer:late}", 1}, sales: 2, wantSold: 1, wantStock: 8, tokensLeft: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			direct := srv.Client(t)
			proxy, err := faultproxy.Start(srv.Addr, tc.fault)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(proxy.Close)
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: tc.retries})
			t.Cleanup(func() { _ = rdb.Close() })
			inv := newOrderInventory(t, rdb, nil, "r0")
			if err := inv.Reset(ctx, "atomic", "sku-1", 10, 0); err != nil {
				t.Fatal(err)
			}
			sell := func(l oneLimit) error {
				_, err := inv.DeductFor(inventory.WithAdmission(ctx, l), "atomic", "sku-1", "", 1)
				return err
			}
			if err := sell(oneLimit{"rate:{buyer:warm}", 1}); err != nil { // loads the script
				t.Fatalf("warm-up sale: %v", err)
			}
			errs := make([]error, tc.sales)
			var wg sync.WaitGroup
			for i := range tc.sales {
				wg.Go(func() { errs[i] = sell(tc.limit) })
				time.Sleep(50 * time.Millisecond)
			}
			wg.Wait()
			sold := 0
			for i, err := range errs {
				switch {
				case err == nil:
					sold++
				case !errors.Is(err, errRefused):
					t.Fatalf("sale %d: %v, want a sale or the limit's refusal", i, err)
				}
			}
			if got := must(direct.Get(ctx, "lockstep:atomic:{sku-1}:stock").Int64()); sold != tc.wantSold || got != tc.wantStock {
				t.Fatalf("%d of %d sales answered sold, stock %d; want %d and %d", sold, tc.sales, got, tc.wantSold, tc.wantStock)
			}
			if !tc.fault.done.Load() {
				t.Fatal("the fault never struck")
			}
			admitted := 0
			for range tc.limit.burst + 1 {
				if sell(tc.limit) == nil {
					admitted++
				}
			}
			if admitted != tc.tokensLeft {
				t.Fatalf("%d sales admitted after the fault, want %d", admitted, tc.tokensLeft)
			}
		})
	}
}
