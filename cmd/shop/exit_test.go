package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/clitest"
)

func TestMain(m *testing.M) {
	clitest.RunMainIfAsked(main)
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
			out, err := clitest.Command(t, 30*time.Second, tc.args...).CombinedOutput()
			if status := clitest.ExitStatus(t, err); status != tc.status || !strings.Contains(string(out), tc.mentions) {
				t.Fatalf("shop %s: exit %d, want %d, saying %q:\n%s", strings.Join(tc.args, " "), status, tc.status, tc.mentions, out)
			}
		})
	}
}
