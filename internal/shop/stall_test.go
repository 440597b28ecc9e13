package shop_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestAMasterStalledPastTheTimeoutSellsEachSaleOnce: on a cluster, the
// master of the atomic stage's stock stops (SIGSTOP) for longer than the
// shop's Redis timeout and then runs what it took in. go-redis's cluster
// client used to send the sale's script again after the timeout, within
// its redirects, so the master ran it twice: 200 with remaining 7 for one
// unit after a first sale, the audit consistent (issue 24). A sale is one
// unit at most; its answer is 200 only if it sold exactly one, and 503
// may_have_sold when its reply was lost.
func TestAMasterStalledPastTheTimeoutSellsEachSaleOnce(t *testing.T) {
	cluster := redistest.StartCluster(t)
	timeout := 200 * time.Millisecond
	r := startReplicas(t, nil, 1, onCluster(cluster), withRedisTimeout(timeout))
	r.reset("atomic", 10, 0)
	if res := r.deduct(0, "atomic", ""); res.status != http.StatusOK {
		t.Fatalf("first sale: %d %s", res.status, res.body)
	}
	master := cluster.MasterOf(t, "lockstep:atomic:{sku-1}:stock")
	master.Pause()
	answer := make(chan response, 1)
	go func() { answer <- r.deduct(0, "atomic", "") }()
	time.Sleep(timeout + 150*time.Millisecond)
	master.Continue()
	res := <-answer
	a := r.audit("atomic")
	t.Logf("the sale during the stall answered %d %s; audit %+v", res.status, res.body, a.Audit)
	switch sold := a.Sold - 1; {
	case res.status == http.StatusOK && (sold != 1 || res.field("remaining") != float64(a.Stock)):
		t.Fatalf("answered 200 remaining %v, but it sold %d units (stock %d)", res.field("remaining"), sold, a.Stock)
	case res.status == http.StatusServiceUnavailable && res.code() != "may_have_sold" || sold > 1:
		t.Fatalf("answered %d %s; sold %d units", res.status, res.body, sold)
	case res.status != http.StatusOK && res.status != http.StatusServiceUnavailable:
		t.Fatalf("answered %d %s", res.status, res.body)
	case !a.Consistent:
		t.Fatalf("audit %+v", a.Audit)
	}
}
