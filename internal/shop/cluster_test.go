package shop_test

import (
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/redistest"
)

// TestStagesOnACluster runs the shop on a real Redis Cluster (three
// masters, three replicas): every stage gives the result it gives on one
// Redis, sales across segments on different slots stay whole, and redlock
// is unavailable with the reason.
func TestStagesOnACluster(t *testing.T) {
	cluster := redistest.StartCluster(t)
	r := startReplicas(t, nil, 3, onCluster(cluster))

	for _, stage := range []string{"setnx", "setnx-expire", "uuid-lua", "watchdog", "fenced", "segmented", "atomic", "segmented-atomic"} {
		t.Run(stage, func(t *testing.T) {
			r.setFaults(stage, `{"work":"1ms"}`)
			a, answers := sellOut(t, r, stage, 40, 20*time.Second)
			if a.Oversold != 0 || !a.Consistent || a.Sold != 40 || a.Stock != 0 || int64(answers.get(http.StatusOK)) != a.Sold {
				t.Fatalf("%s on a cluster: %+v after %d sales answered", stage, a.Audit, answers.get(http.StatusOK))
			}
		})
	}
	t.Run("naive", func(t *testing.T) {
		r.setFaults("naive", `{"work":"5ms"}`)
		if a, _ := sellOut(t, r, "naive", 20, 10*time.Second); a.Oversold == 0 {
			t.Fatalf("naive did not oversell on a cluster: %+v", a.Audit)
		}
	})
	for _, stage := range segmentedStages {
		t.Run(stage+" sale across segments", func(t *testing.T) { sellsAcrossSegments(t, r, stage) })
		t.Run(stage+" refusals across segments", func(t *testing.T) { refusesOnlyWhatTheSKUCannotServe(t, r, stage) })
	}
	t.Run("segments spread over the masters", func(t *testing.T) {
		r.reset("segmented", 160, 16)
		rdb := cluster.Client(t)
		perMaster := map[string]int{}
		for i := range 16 {
			master, err := rdb.MasterForKey(t.Context(), segmentKey(i, 16, "stock"))
			if err != nil {
				t.Fatal(err)
			}
			perMaster[master.Options().Addr]++
		}
		counts := slices.Collect(maps.Values(perMaster))
		if len(counts) != 3 || slices.Max(counts)-slices.Min(counts) > 1 {
			t.Fatalf("16 segments per master: %v", perMaster)
		}
		t.Logf("16 segments per master: %v", perMaster)
	})
	t.Run("redlock unavailable", func(t *testing.T) {
		res := r.do(0, http.MethodGet, "/api/stages", "", nil)
		if !strings.Contains(string(res.body), "a Redis Cluster's masters share one keyspace") {
			t.Fatalf("redlock's reason on a cluster missing: %s", res.body)
		}
	})
}
