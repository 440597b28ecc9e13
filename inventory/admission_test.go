package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

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
