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

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen"
)

// orderWorkerPackage is the order worker the workshop builds when a
// scenario runs an async stage.
const orderWorkerPackage = "github.com/lockstep/lockstep/cmd/orderworker"

// orderWorkerCount is how many order workers the workshop runs: two, so
// that a dead one's entries have someone to claim them.
const orderWorkerCount = 2

// asyncStages are the async stages sc runs.
func asyncStages(sc *loadgen.Scenario) []string {
	var stages []string
	for _, r := range sc.Runs {
		if _, ok := asyncorders.ModeOf(r.Stage); ok && !slices.Contains(stages, r.Stage) {
			stages = append(stages, r.Stage)
		}
	}
	return stages
}

// orderWorkers are the worker processes, each restarted under its name
// when it exits (a restarted worker finishes its own pending entries).
type orderWorkers struct{ sups []*supervised }

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
func startOrderWorkers(ctx context.Context, sc *loadgen.Scenario, redisAddr string, servers *lockServers, dir string, log *slog.Logger) (*orderWorkers, error) {
	stages := asyncStages(sc)
	if len(stages) == 0 {
		return nil, nil
	}
	bin := filepath.Join(dir, "orderworker")
	if msg, err := exec.CommandContext(ctx, "go", "build", "-o", bin, orderWorkerPackage).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", orderWorkerPackage, err, msg)
	}
	w := &orderWorkers{}
	for i := range orderWorkerCount {
		name := fmt.Sprintf("orderworker-%d", i+1)
		env := append([]string{
			"LOCKSTEP_REDIS_ADDR=" + redisAddr, "LOCKSTEP_REDIS_PASSWORD=", "LOCKSTEP_CONSUMER=" + name,
			"LOCKSTEP_STAGES=" + strings.Join(stages, ","), "LOCKSTEP_SKUS=" + sc.SKU,
		}, servers.env()...)
		sup, err := supervise(name, log, func() (*process, error) {
			return startProcess(name, bin, nil, env, filepath.Join(dir, name+".log"))
		})
		if err != nil {
			w.stop()
			return nil, err
		}
		w.sups = append(w.sups, sup)
	}
	return w, nil
}
