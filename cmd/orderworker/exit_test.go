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

// A value the worker cannot run with is refused before it starts, exit 2
// naming the flag: -block 0 (XREADGROUP BLOCK 0 never returns, so the
// worker would ignore its stop and never claim), a block under a
// millisecond (sent as BLOCK 0), a negative one (a busy loop), a zero
// claim bound (it would take entries live workers are handling), and the
// rest below. Asking for the usage is 0.
func TestExitStatuses(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		status   int
		mentions string
	}{
		{[]string{"-h"}, 0, "-claim-idle"},
		{[]string{"-nope"}, 2, "nope"},
		{[]string{"-stages", "atomic"}, 2, "atomic"},
		{[]string{"-block", "0"}, 2, "-block"},
		{[]string{"-block", "-1s"}, 2, "-block"},
		{[]string{"-block", "500us"}, 2, "-block"},
		{[]string{"-claim-idle", "0"}, 2, "-claim-idle"},
		{[]string{"-claim-idle", "-5s"}, 2, "-claim-idle"},
		{[]string{"-claim-every", "0"}, 2, "-claim-every"},
		{[]string{"-shutdown-timeout", "0"}, 2, "-shutdown-timeout"},
		{[]string{"-batch", "0"}, 2, "-batch"},
		{[]string{"-max-deliveries", "0"}, 2, "-max-deliveries"},
		{[]string{"-pay-within", "-1s"}, 2, "-pay-within"},
		{[]string{"-crash-at", "after-ack"}, 2, "after-ack"},
		{[]string{"-log-level", "loud"}, 2, "loud"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"-orders-sqlite", t.TempDir() + "/o.db", "-redis-addr", "127.0.0.1:1"}, tc.args...)
			out, err := clitest.Command(t, 10*time.Second, args...).CombinedOutput()
			if status := clitest.ExitStatus(t, err); status != tc.status || !strings.Contains(string(out), tc.mentions) {
				t.Fatalf("orderworker %s: exit %d, want %d, saying %q:\n%s", strings.Join(tc.args, " "), status, tc.status, tc.mentions, out)
			}
		})
	}
}
