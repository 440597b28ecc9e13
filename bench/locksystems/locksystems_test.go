package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver"
)

// TestMain lets the test binary be the run's child processes, as the
// command is: os.Executable is the test binary.
func TestMain(m *testing.M) {
	if spec, ok := os.LookupEnv(childEnv); ok {
		if err := runChild(context.Background(), spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "locksystems child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A short run of the whole table against real servers: every lock
// excludes under contention; after its holder's kill -9 the MySQL row is
// stuck (no acquisition within the bound, the row still there) and every
// lease-based lock is acquired again after its lease; a holder frozen past
// its lease and continued makes 2 holders with a lease and 1 with the row;
// a killed etcd or ZooKeeper leader leaves 1 holder (the new leader has
// the lock), a killed Redis master whose replica never saw the lock 2.
func TestTheTableAsTheSeedsSayIt(t *testing.T) {
	// A race-built child sleeps a second before it exits (the race
	// detector's atexit_sleep_ms) while the run waits for it; its reports
	// still fail the run (the child's exit status).
	t.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cfg := config{duration: 300 * time.Millisecond, procs: 2, goroutines: 2, keys: 4, uncontended: 20, faultWait: 6 * time.Second, attempt: time.Second}
	var rows []row
	last := time.Now()
	err := measureAll(t.Context(), cfg, func(w row) {
		t.Logf("%s measured in %v", w.name, time.Since(last).Round(time.Millisecond))
		last = time.Now()
		rows = append(rows, w)
	})
	if errors.Is(err, lockserver.ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("%v (run `make test`, which installs the servers)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		stuck                   bool
		pauseHolders, failovers int64 // failovers 0: the system has none
	}{
		redisToken:    {pauseHolders: 2, failovers: 2},
		redisWatchdog: {pauseHolders: 2, failovers: 2},
		etcdMutex:     {pauseHolders: 2, failovers: 1},
		mysqlRow:      {stuck: true, pauseHolders: 1},
		zkRecipe:      {pauseHolders: 2, failovers: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for _, w := range rows {
		t.Run(w.name, func(t *testing.T) {
			exp, ok := want[w.name]
			if !ok {
				t.Fatalf("unexpected row %q", w.name)
			}
			t.Logf("crash %+v, pause %+v, failover %+v", w.crash, w.pause, w.failover)
			if w.one.perSec <= 0 || w.many.perSec <= 0 || w.one.overlaps+w.many.overlaps != 0 {
				t.Errorf("contended: %.0f and %.0f acq/s, %d overlaps", w.one.perSec, w.many.perSec, w.one.overlaps+w.many.overlaps)
			}
			switch {
			case exp.stuck && !(w.crash.stuck && w.crash.kept):
				t.Errorf("after the crash: %+v, want stuck with the record kept", w.crash)
			case !exp.stuck && (w.crash.stuck || w.crash.recovered < w.faultLease/2 || w.crash.recovered > cfg.faultWait):
				t.Errorf("after the crash: %+v, want acquired after about the %v lease", w.crash, w.faultLease)
			}
			if failed := w.crash.failed + w.pause.failed + w.failover.failed; failed != "" {
				t.Errorf("an attempt failed otherwise than at its deadline: %s", failed)
			}
			if w.pause.holders != exp.pauseHolders || w.pause.otherOut != (exp.pauseHolders == 1) {
				t.Errorf("pause: %+v, want %d holders", w.pause, exp.pauseHolders)
			}
			switch {
			case exp.failovers == 0 && w.failover.none == "":
				t.Errorf("failover: %+v, want none", w.failover)
			case exp.failovers != 0 && w.failover.holders != exp.failovers:
				t.Errorf("failover: %d holders, want %d", w.failover.holders, exp.failovers)
			case w.failover.elects && (w.failover.elected <= 0 || w.failover.stalled <= 0):
				t.Errorf("failover: leader after %v, a lock after %v: not measured", w.failover.elected, w.failover.stalled)
			}
		})
	}
}
