package loadgen

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/shoprules"
)

// recordingWatcher keeps what a run told it, and samples the running
// stage's figures while it runs.
type recordingWatcher struct {
	mu       sync.Mutex
	started  []StageStart
	done     []string
	live     []LiveSnapshot
	sampling sync.WaitGroup
}

func (w *recordingWatcher) StageStarting(ctx context.Context, s StageStart, live *LiveStage) error {
	w.mu.Lock()
	w.started = append(w.started, s)
	w.mu.Unlock()
	w.sampling.Go(func() {
		for range 20 {
			time.Sleep(20 * time.Millisecond)
			w.mu.Lock()
			w.live = append(w.live, live.Snapshot())
			w.mu.Unlock()
		}
	})
	return nil
}

func (w *recordingWatcher) StageDone(row report.StageRun) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = append(w.done, row.Stage)
}

// TestWatcherFollowsTheRun checks a Watcher hears of each stage run that
// runs before it starts, of every row once final (skipped ones too), and
// sees the running stage's figures grow.
func TestWatcherFollowsTheRun(t *testing.T) {
	fake := startFakeShop(t, 1)
	sc, err := ParseScenario([]byte("runs:\n  - stage: racy\n    stock: 100000\n    duration: 500ms\n  - stage: absent\n  - stage: atomic\n    duration: 300ms\n    stock: 100000\n"), shoprules.Shop())
	if err != nil {
		t.Fatal(err)
	}
	w := &recordingWatcher{}
	if _, err := Run(context.Background(), Config{Target: fake.proxy, Scenario: sc, Watch: w}); err != nil {
		t.Fatal(err)
	}
	w.sampling.Wait()
	if len(w.started) != 2 || w.started[0].Stage != "racy" || w.started[1].Stage != "atomic" || w.started[1].Index != 2 || w.started[0].Runs != 3 {
		t.Errorf("started %+v; want racy (0 of 3) and atomic (2), not the absent stage", w.started)
	}
	if !slices.Equal(w.done, []string{"racy", "absent", "atomic"}) {
		t.Errorf("rows done %v", w.done)
	}
	most := 0
	for _, s := range w.live {
		if s.Requests != s.Sales+s.SoldOut+s.Busy+s.Errors {
			t.Errorf("snapshot %+v: requests are not the sum of the outcomes", s)
		}
		most = max(most, s.Sales)
	}
	if most == 0 {
		t.Error("no snapshot saw a sale while the stages ran")
	}
}
