package loadgen

import (
	"context"
	"github.com/lockstep/lockstep/internal/storeview"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shoprules"
)

func TestBusiestShare(t *testing.T) {
	for _, c := range []struct {
		name    string
		shards  []report.ShardLoad
		share   float64
		masters int
	}{
		{"no cluster", nil, 0, 0},
		{"no commands", []report.ShardLoad{{Addr: "a"}, {Addr: "b"}}, 0, 2},
		{"one hot key", []report.ShardLoad{{Addr: "a", Commands: 990}, {Addr: "b", Commands: 6}, {Addr: "c", Commands: 4}}, 0.99, 3},
		{"spread", []report.ShardLoad{{Addr: "a", Commands: 40}, {Addr: "b", Commands: 30}, {Addr: "c", Commands: 30}}, 0.4, 3},
	} {
		r := report.StageRun{Shards: c.shards}
		if share, masters := r.BusiestShare(); share != c.share || masters != c.masters {
			t.Errorf("%s: BusiestShare() = %v, %d; want %v, %d", c.name, share, masters, c.share, c.masters)
		}
	}
}

// TestLiveShardsDuringTheLoad: on a cluster the running stage's figures
// include each master's load so far, and the row and its HTML table each
// master's load phase.
func TestLiveShardsDuringTheLoad(t *testing.T) {
	cluster := redistest.StartCluster(t)
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs:\n  - stage: atomic\n    stock: 100000\n    duration: 2s\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	w := &recordingWatcher{}
	rep, err := Run(context.Background(), Config{Target: fake.proxy, Scenario: sc, Watch: w, Stores: openStores(t, storeview.Addrs{Cluster: cluster.Addrs()})})
	if err != nil {
		t.Fatal(err)
	}
	w.sampling.Wait()
	seen := 0
	for _, s := range w.live {
		seen = max(seen, len(s.Shards))
	}
	if seen != 3 {
		t.Errorf("the live figures showed %d masters at most; want the cluster's 3", seen)
	}
	shards := rep.Stages[0].Shards
	html, err := report.ShardsHTML(shards)
	if err != nil || len(shards) != 3 || strings.Count(string(html), "data-shard=") != 3 {
		t.Errorf("the row's masters %+v, drawn %q (%v); want 3 rows", shards, html, err)
	}
	if html, _ := report.ShardsHTML(nil); html != "" {
		t.Errorf("ShardsHTML off a cluster = %q, want nothing", html)
	}
}
