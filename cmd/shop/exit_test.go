package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain runs the command itself when a test starts this test binary
// again with LOCKSTEP_RUN_MAIN=1: its exit status is the command's.
func TestMain(m *testing.M) {
	if os.Getenv("LOCKSTEP_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Asking for the usage is no failure (0); a usage error exits 2, as Go's
// flag package does, apart from a shop that failed (1).
func TestExitStatuses(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		status   int
		mentions string
	}{
		{[]string{"--help"}, 0, "-redis-addr"},
		{[]string{"-h"}, 0, "-redis-addr"},
		{[]string{"--nope"}, 2, "nope"},
		{[]string{"--lock-wait", "soon"}, 2, "lock-wait"},
		{[]string{"--log-level", "loud"}, 2, "loud"},
		{[]string{"stray"}, 2, "stray"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			// Killed after 30 s, should it serve what it should refuse.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], tc.args...)
			cmd.Env = append(os.Environ(), "LOCKSTEP_RUN_MAIN=1")
			out, err := cmd.CombinedOutput()
			status := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tc.status || !strings.Contains(string(out), tc.mentions) {
				t.Fatalf("shop %s: exit %d, want %d, saying %q:\n%s", strings.Join(tc.args, " "), status, tc.status, tc.mentions, out)
			}
		})
	}
}
