package httpapi_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/internal/httpapi"
	"github.com/lockstep/lockstep/inventory"
)

// failFirst fails the first n EVALSHAs of one script on a client with err,
// without sending them: what the client would return for a call it never
// sent (no pooled connection free, a refused dial).
type failFirst struct {
	sha  string
	err  error
	left *atomic.Int32
}

func (f failFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f failFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); cmd.Name() == "evalsha" && len(args) > 1 && args[1] == f.sha && f.left.Add(-1) >= 0 {
			cmd.SetErr(f.err)
			return f.err
		}
		return next(ctx, cmd)
	}
}
func (f failFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func inventorySHA(t *testing.T, name string) string {
	t.Helper()
	src, err := fs.ReadFile(inventory.Scripts(), "scripts/"+name)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// A keyed sale whose stock write was never sent (every pooled connection
// busy under a flash sale's load) sold nothing: it answers so, and the
// retry with the same key sells at once (issue 34, defect 3: it answered
// "outcome unknown" and the key was refused for the day).
func TestAKeyedSaleWhoseWriteWasNeverSentCanBeRetried(t *testing.T) {
	var left atomic.Int32
	left.Store(1)
	ks := startKeyedShop(t, noHook{}, 2*time.Second, failFirst{sha: inventorySHA(t, "atomic_deduct.lua"), err: redis.ErrPoolTimeout, left: &left})
	first := ks.serve()
	if first.Code != http.StatusServiceUnavailable || !containsCode(first, httpapi.CodeRedisUnavailable) {
		t.Fatalf("sale whose write was not sent = %d %s, want 503 %s", first.Code, first.Body, httpapi.CodeRedisUnavailable)
	}
	retry := ks.serve()
	if retry.Code != http.StatusOK || retry.Header().Get("Idempotent-Replayed") != "" {
		t.Fatalf("retry with the same key = %d %s, want a sale", retry.Code, retry.Body)
	}
	if a, _ := ks.inv.Audit(context.Background(), "atomic", "sku-1"); a.Sold != 1 {
		t.Fatalf("sold %d under one key", a.Sold)
	}
}

// noHook leaves a client as it is.
type noHook struct{}

func (noHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (noHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (noHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A keyed sale that sold nothing (sold out) whose key could not be freed
// at once — its release failed three times in a short Redis outage — has
// its key freed once Redis answers again: after a restock the retry with
// that key sells (issue 34, defect 4: the marker, durable since before the
// write, stayed for the idempotency TTL, and every retry was told "it may
// have sold").
func TestASoldOutSaleWhoseReleaseFailedFreesItsKey(t *testing.T) {
	var left atomic.Int32
	left.Store(3)
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	ks := startKeyedShop(t, failFirst{sha: scriptSHA(t, "idempotency_release.lua"), err: refused, left: &left}, time.Second)
	ctx := context.Background()
	if err := ks.inv.Reset(ctx, "atomic", "sku-1", 0, 0); err != nil {
		t.Fatal(err)
	}
	if first := ks.serve(); first.Code != http.StatusConflict || !containsCode(first, httpapi.CodeSoldOut) {
		t.Fatalf("sale of a sold-out SKU = %d %s, want 409 sold_out", first.Code, first.Body)
	}
	if left.Load() > 0 {
		t.Fatalf("the release was tried %d times, want 3 failures", 3-left.Load())
	}
	if err := ks.inv.Reset(ctx, "atomic", "sku-1", 10, 0); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // Redis answers again
	if retry := ks.serve(); retry.Code != http.StatusOK {
		t.Fatalf("retry after the restock = %d %s, want a sale", retry.Code, retry.Body)
	}
}

// stallAfter sleeps for stall after the first EVALSHA of one script has
// run, as a sale does that releases several locks in a stalling Redis
// after its write (segmented: up to a second per segment, then settle).
type stallAfter struct {
	sha   string
	stall time.Duration
	once  *atomic.Bool
}

func (s stallAfter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s stallAfter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && runs(cmd, s.sha) && s.once.CompareAndSwap(false, true) {
			time.Sleep(s.stall)
		}
		return err
	}
}

// runs reports whether cmd runs the script of sha, by EVALSHA or EVAL.
func runs(cmd redis.Cmder, sha string) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	switch src, _ := args[1].(string); cmd.Name() {
	case "evalsha":
		return src == sha
	case "eval":
		sum := sha1.Sum([]byte(src))
		return hex.EncodeToString(sum[:]) == sha
	}
	return false
}

func (s stallAfter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A keyed sale still running after its write, longer than any fixed
// bound past its deadline, is not declared of unknown outcome: a retry
// meanwhile is told the key is in progress, and one after it finished
// gets its answer (issue 34, defect 5: past request timeout + 5 s the
// retry was told 409 outcome_unknown, "use a new key", and the buyer
// bought twice).
func TestARetryDuringALongSaleIsToldItIsInProgress(t *testing.T) {
	const requestTimeout = 200 * time.Millisecond
	const stall = 6 * time.Second // past requestTimeout + 5 s
	ks := startKeyedShop(t, noHook{}, requestTimeout, stallAfter{sha: inventorySHA(t, "atomic_deduct.lua"), stall: stall, once: new(atomic.Bool)})
	first := make(chan int, 1)
	go func() { rec := ks.serve(); t.Logf("the long sale: %d %s", rec.Code, rec.Body); first <- rec.Code }()
	time.Sleep(stall - 500*time.Millisecond)
	if retry := ks.serve(); retry.Code != http.StatusLocked || !containsCode(retry, httpapi.CodeKeyInProgress) {
		t.Fatalf("retry during the sale = %d %s, want 423 %s", retry.Code, retry.Body, httpapi.CodeKeyInProgress)
	}
	if code := <-first; code != http.StatusOK {
		t.Fatalf("the long sale answered %d", code)
	}
	if again := ks.serve(); again.Code != http.StatusOK || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after the sale = %d %s, want its answer replayed", again.Code, again.Body)
	}
	if a, _ := ks.inv.Audit(context.Background(), "atomic", "sku-1"); a.Sold != 1 {
		t.Fatalf("sold %d under one key", a.Sold)
	}
}
