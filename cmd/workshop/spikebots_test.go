package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/redistest"
)

// TestSpikeBotsScenario runs the shipped spike-bots scenario, its load
// shortened to 4 s, on the whole stack (redis-server, three shops behind
// nginx): each row's front door is applied (the replicas restarted, nginx
// reloaded), and every row meets the expectations the scenario writes
// down: limit-none lets the bots outbuy their head count, limit-local
// admits about 3× a buyer's limit over 3 replicas, limit-nginx and
// limit-redis hold it, and with the mark almost no request after the
// sell-out reaches Redis.
func TestSpikeBotsScenario(t *testing.T) {
	redistest.Binary(t)
	require(t, "nginx", "nginx", "/usr/sbin/nginx")
	bins := buildBinaries(t)
	shipped, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "spike-bots.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	short := strings.Replace(string(shipped), "  duration: 10s\n", "  duration: 4s\n", 1)
	if short == string(shipped) {
		t.Fatal("spike-bots.yaml has no defaults duration of 10s to shorten")
	}
	scenario := filepath.Join(t.TempDir(), "spike-bots.yaml")
	if err := os.WriteFile(scenario, []byte(short), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	rep, stdout, _ := runWorkshop(t, 3*time.Minute, "--shop-bin", bins.shop, "--lock-servers", "off", "--scenario", scenario, "--out", out)
	if !rep.ExpectationsMet {
		t.Errorf("expectations not met:\n%s", stdout)
	}
	want := map[string]string{"limit-none": plan.LimitNone, "limit-local": "limit-local", "limit-nginx": plan.LimitNginx, "limit-redis": plan.LimitRedis, "mark": plan.LimitNone}
	for _, r := range rep.Stages {
		switch {
		case r.Spike == nil || r.FrontDoor == nil:
			t.Errorf("%s: no spike record or front door: %+v", r.Name(), r)
		case r.FrontDoor.Limiter != want[r.Name()]:
			t.Errorf("%s ran behind %s", r.Name(), r.FrontDoor.Describe())
		case r.Spike.HonestUnits+r.Spike.BotUnits != r.Sales || r.Sales != 100:
			t.Errorf("%s: %d honest and %d bot units of %d sales, want the 100 units", r.Name(), r.Spike.HonestUnits, r.Spike.BotUnits, r.Sales)
		case (r.FrontDoor.Limiter == plan.LimitNone) != (r.Spike.RateLimited == 0):
			t.Errorf("%s: %d requests refused by the limiter", r.Name(), r.Spike.RateLimited)
		}
	}
	if len(rep.Stages) != 5 {
		t.Errorf("%d rows, want 5", len(rep.Stages))
	}
	if !strings.Contains(stdout, "units honest/bots") {
		t.Errorf("the tables have no spike columns:\n%s", stdout)
	}
}
