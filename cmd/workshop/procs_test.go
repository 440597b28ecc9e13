package main

import (
	"context"
	"github.com/lockstep/lockstep/internal/launch"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// signalUntilExit, as CrashOrderWorker uses it: a signal the process misses
// (it came before the worker listened) is sent again until it exits, and
// the process is kept down until release; one that never exits is killed
// and started again after the bound, and the call fails.
func TestSignalUntilExitResendsAndHoldsOrKillsAtTheBound(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		wantErr      string
	}{
		// Exits on the second SIGUSR1 only: the first is "lost".
		{"exits on the second signal", `n=0; trap 'n=$((n+1)); [ $n -ge 2 ] && exit 0' USR1; while :; do sleep 0.05; done`, ""},
		{"never exits", `trap '' USR1; while :; do sleep 0.05; done`, "did not exit within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			starts := 0
			s, err := supervise("w", slog.New(slog.NewTextHandler(io.Discard, nil)), func() (*launch.Process, error) {
				starts++
				return launch.Start("w", "/bin/sh", []string{"-c", tc.script}, nil, filepath.Join(dir, "w.log"))
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.stop(syscall.SIGTERM)
			time.Sleep(100 * time.Millisecond) // the shell sets its trap
			err = s.signalUntilExit(context.Background(), syscall.SIGUSR1, 3*time.Second)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%v; want an error saying %q", err, tc.wantErr)
				}
				waitFor(t, func() bool { return s.pid() != 0 && s.restartCount() == 1 }, "started again")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(3 * restartDelay)
			if s.pid() != 0 || s.restartCount() != 0 {
				t.Fatalf("started again before release: pid %d, %d restarts", s.pid(), s.restartCount())
			}
			s.release()
			waitFor(t, func() bool { return s.pid() != 0 && s.restartCount() == 1 }, "started again after release")
		})
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within 5 s", what)
		}
	}
}
