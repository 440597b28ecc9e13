package main

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/launch"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
)

// orderWorkerPackage is the order worker the workshop builds when a
// scenario runs an async stage.
const orderWorkerPackage = "github.com/lockstep/lockstep/cmd/orderworker"

// orderWorkerCount is how many order workers the workshop runs: two, so
// that a dead one's entries have someone to claim them.
const orderWorkerCount = 2

// asyncStages are the async stages sc runs.
func asyncStages(sc *plan.Scenario) []string {
	var stages []string
	for _, r := range sc.Runs {
		if _, ok := asyncorders.ModeOf(r.Stage); ok && !slices.Contains(stages, r.Stage) {
			stages = append(stages, r.Stage)
		}
	}
	return stages
}

// sweepEvery is how often the workers' payment sweepers run.
const sweepEvery = 200 * time.Millisecond

// paymentEnv gives the workers a payment deadline and a sweeper when a run
// of sc has a payment step (the longest pay_within of them); none
// otherwise, so that no other run's orders are ever cancelled.
func paymentEnv(sc *plan.Scenario) []string {
	var within time.Duration
	for _, r := range sc.Runs {
		if r.Payment != nil {
			within = max(within, r.Payment.PayWithin.D())
		}
	}
	if within == 0 {
		return []string{"LOCKSTEP_PAY_WITHIN=0", "LOCKSTEP_SWEEP_EVERY=0"}
	}
	return []string{"LOCKSTEP_PAY_WITHIN=" + within.String(), "LOCKSTEP_SWEEP_EVERY=" + sweepEvery.String()}
}

// orderWorkers are the worker processes, each restarted under its name
// when it exits (a restarted worker finishes its own pending entries).
type orderWorkers struct {
	sups []*supervised
	// redisAddr is the stock's Redis, where their stream is.
	redisAddr string
}

// named is the worker whose consumer name is name.
func (w *orderWorkers) named(name string) (*supervised, error) {
	if w != nil {
		for _, s := range w.sups {
			if s.name == name {
				return s, nil
			}
		}
	}
	return nil, fmt.Errorf("order worker %q: %w", name, errSetUp)
}

func (w *orderWorkers) stop() {
	for _, s := range w.sups {
		s.stop(syscall.SIGTERM)
	}
}

func (w *orderWorkers) pids() []int {
	var pids []int
	for _, s := range w.sups {
		if pid := s.pid(); pid != 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// startOrderWorkers builds cmd/orderworker and starts orderWorkerCount of
// them on the stock's Redis and the shops' order table (servers.env), when
// sc runs an async stage; nil otherwise.
func startOrderWorkers(ctx context.Context, sc *plan.Scenario, redisAddr string, servers *lockServers, dir string, log *slog.Logger) (*orderWorkers, error) {
	stages := asyncStages(sc)
	if len(stages) == 0 {
		return nil, nil
	}
	paying, async := 0, 0
	for _, r := range sc.Runs {
		if _, ok := asyncorders.ModeOf(r.Stage); ok {
			async++
			if r.Payment != nil {
				paying++
			}
		}
	}
	if paying > 0 && paying < async {
		// The workers' payment deadline holds for every order they write:
		// a run without a payment step would see its orders cancelled.
		return nil, fmt.Errorf("a scenario with a payment step runs async stages with payment steps only; run payment-timeout on its own")
	}
	bin := filepath.Join(dir, "orderworker")
	if msg, err := exec.CommandContext(ctx, "go", "build", "-o", bin, orderWorkerPackage).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", orderWorkerPackage, err, msg)
	}
	w := &orderWorkers{redisAddr: redisAddr}
	for i := range orderWorkerCount {
		name := fmt.Sprintf("orderworker-%d", i+1)
		env := append([]string{
			"LOCKSTEP_REDIS_ADDR=" + redisAddr, "LOCKSTEP_REDIS_PASSWORD=", "LOCKSTEP_CONSUMER=" + name,
			"LOCKSTEP_STAGES=" + strings.Join(stages, ","), "LOCKSTEP_SKUS=" + sc.SKU,
		}, append(paymentEnv(sc), servers.env()...)...)
		sup, err := supervise(name, log, func() (*launch.Process, error) {
			return launch.Start(name, bin, nil, env, filepath.Join(dir, name+".log"))
		})
		if err != nil {
			w.stop()
			return nil, err
		}
		w.sups = append(w.sups, sup)
	}
	return w, nil
}
