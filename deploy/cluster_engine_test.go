package deploy

import (
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/scenarios"
)

// TestComposeClusterOnEngine runs the cluster profile as docs/compose.md does,
// on a real Docker engine: up (twice: cluster-init leaves the cluster it
// made be), cluster-nginx spreading over cluster-shop1..3, and the
// cluster-loadgen's shards scenario, whose report must show every stage
// without oversell and consistent, atomic's busiest master carrying at
// least 90 % of the commands and each segmented stage's at most half. Then
// Prometheus scrapes every node and the dashboard's cluster row has data
// for each, its busiest master over the run the one the report names; and
// docker compose down leaves nothing behind.
func TestComposeClusterOnEngine(t *testing.T) {
	c, p := composeOnEngine(t)
	var nodes []string
	for _, s := range clusterNodes(p) {
		nodes = append(nodes, s.Name+":6379")
	}
	c.run(t, "build")
	c.up(t, p, clusterProfile)
	c.up(t, p, clusterProfile)
	if logs := c.run(t, "--profile", clusterProfile, "logs", "--no-color", "cluster-init"); !strings.Contains(logs, "serves every slot") || !strings.Contains(logs, "already made") {
		t.Errorf("cluster-init over two ups: want the cluster made, then left as it was:\n%s", logs)
	}

	t.Run("nginx", func(t *testing.T) {
		checkComposeNginx(t, "http://"+c.published["LOCKSTEP_CLUSTER_HTTP_PORT"], shopServices(t, p, clusterProfile))
	})

	// Every node scraped before the load, so the panels see all of it.
	s := c.prometheus(t)
	waitComposeTargets(t, s, clusterProfile)

	if err := os.MkdirAll(repoPath("out", "compose-cluster"), 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out := c.runLoadgen(t, clusterProfile, "cluster-loadgen")
	t.Logf("cluster-loadgen:\n%s", tail(out, 30))
	rep := readReport(t, repoPath("out", "compose-cluster", "report.json"), start)
	atomicMaster := checkShardsReport(t, rep, nodes)

	// The last scrape after the load, and a step of the range queries.
	time.Sleep(2 * s.scrape)
	end := time.Now()
	t.Run("cluster panels", func(t *testing.T) { checkClusterPanels(t, s, start, end, nodes, atomicMaster) })

	c.down(t, s)
}

// checkShardsReport: every stage of scenarios/shards ran on the cluster's
// three masters, named as the nodes announce themselves, without oversell
// and consistent; atomic's one key piles on one master, the segmented
// stages spread. It returns atomic's master.
func checkShardsReport(t *testing.T, rep *report.Report, nodes []string) (atomicMaster string) {
	t.Helper()
	sc, _, err := scenarios.Load("shards")
	if err != nil {
		t.Fatal(err)
	}
	ran := checkReportRows(t, rep)
	for _, run := range sc.Runs {
		r := ran[run.Stage]
		if r == nil {
			t.Errorf("%s did not run (ran: %v)", run.Stage, slices.Sorted(maps.Keys(ran)))
			continue
		}
		if r.Sales == 0 || r.Oversold != 0 || !r.Consistent {
			t.Errorf("%s: %d sales, oversold %d, consistent %v; want sales, none oversold, consistent", r.Stage, r.Sales, r.Oversold, r.Consistent)
		}
		share, masters := r.BusiestShare()
		if masters != 3 {
			t.Errorf("%s: figures of %d masters, want 3", r.Stage, masters)
			continue
		}
		t.Logf("%-16s sales %7d (errors %d)  sales/s %6.0f  oversold %d  consistent %v  busiest master %s: %.0f%% of the commands",
			r.Stage, r.Sales, r.Errors, r.SalesPerSec, r.Oversold, r.Consistent, r.Shards[0].Addr, 100*share)
		for _, shard := range r.Shards {
			if !slices.Contains(nodes, shard.Addr) {
				t.Errorf("%s: master %s, want one of the nodes by name %v", r.Stage, shard.Addr, nodes)
			}
		}
		switch {
		case run.Stage == "atomic" && share < 0.9:
			t.Errorf("atomic: busiest master %.0f%% of the commands; want its one key's master to carry at least 90%%", 100*share)
		case strings.HasPrefix(run.Stage, "segmented") && share > 0.5:
			t.Errorf("%s: busiest master %.0f%% of the commands; want the segments spread, at most half on one", run.Stage, 100*share)
		}
	}
	if r := ran["atomic"]; r != nil && len(r.Shards) > 0 {
		return r.Shards[0].Addr
	}
	t.Fatal("no per-master figures of atomic")
	return ""
}

// checkClusterPanels runs the dashboard's cluster row over the load: every
// node has data, labelled with its role (master, or slave as Redis calls a
// replica); and over the whole run the master
// that processed the most commands is atomic's (the SKU's slot, where
// watchdog's lock and atomic's stock both live).
func checkClusterPanels(t *testing.T, s *stack, start, end time.Time, nodes []string, atomicMaster string) {
	panels := 0
	for _, q := range dashboardQueries(t) {
		if !strings.Contains(q.expr, clusterFilter) {
			continue
		}
		panels++
		seen := map[string]bool{}
		for _, series := range s.queryRange(t, s.grafanaExpr(q.expr, ".*"), start, end) {
			if role := series.Metric["role"]; role != "master" && role != "slave" {
				t.Errorf("%q: %s has role %q", q.panel, series.Metric["instance"], role)
			}
			if hasValues([]rangeSeries{series}) {
				seen[series.Metric["instance"]] = true
			}
		}
		for _, node := range nodes {
			if !seen[node] {
				t.Errorf("%q: no data for %s (data for %v)", q.panel, node, slices.Sorted(maps.Keys(seen)))
			}
		}
	}
	if panels == 0 {
		t.Fatalf("no dashboard query selects %s", clusterFilter)
	}

	window := strconv.Itoa(int(end.Sub(start).Seconds())+1) + "s"
	var res struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	expr := withRole(fmt.Sprintf(`sum by (instance) (increase(redis_commands_processed_total{%s}[%s]))`, clusterFilter, window))
	s.promAPI(t, "/api/v1/query", url.Values{"query": {expr}, "time": {formatTime(end)}}, &res)
	busiest, most := "", -1.0
	commands := map[string]string{}
	for _, r := range res.Result {
		value, _ := r.Value[1].(string)
		commands[r.Metric["instance"]+" "+r.Metric["role"]] = value
		if n, err := strconv.ParseFloat(value, 64); err == nil && r.Metric["role"] == "master" && n > most {
			busiest, most = r.Metric["instance"], n
		}
	}
	t.Logf("commands per node over the run, from Prometheus: %v", commands)
	if busiest != atomicMaster {
		t.Errorf("busiest master over the run in Prometheus: %q, want atomic's, %s (commands %v)", busiest, atomicMaster, commands)
	}
}
