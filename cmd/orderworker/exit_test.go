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

// Asking for the usage is no failure (0); every flag's bad value is a
// usage error (2) before the worker dials Redis or opens the order table:
// among them -block 0 (XREADGROUP BLOCK 0 never returns, so the worker
// would ignore its stop and never claim), a block under a millisecond
// (sent as BLOCK 0), a negative one (a busy loop) and a zero claim bound
// (it would take entries live workers are handling).
func TestExitStatuses(t *testing.T) {
	table := []string{"--orders-sqlite", os.DevNull}
	for _, tc := range []struct {
		args     []string
		status   int
		mentions string
	}{
		{[]string{"--help"}, 0, "-redis-addr"},
		{[]string{"--nope"}, 2, "nope"},
		{[]string{"stray"}, 2, "stray"},
		{nil, 2, "--orders-sqlite"},
		{[]string{"--orders-sqlite", "o.db", "--mysql-dsn", "u@tcp(h:3306)/d"}, 2, "--orders-sqlite"},
		{append([]string{"--redis-addr", "foo"}, table...), 2, "--redis-addr"},
		{append([]string{"--redis-db", "-1"}, table...), 2, "--redis-db"},
		{append([]string{"--consumer", ""}, table...), 2, "--consumer"},
		{append([]string{"--stages", "atomic"}, table...), 2, "--stages"},
		{append([]string{"--stages", ""}, table...), 2, "--stages"},
		{append([]string{"--skus", ""}, table...), 2, "--skus"},
		{append([]string{"--batch", "0"}, table...), 2, "--batch"},
		{append([]string{"--max-deliveries", "0"}, table...), 2, "--max-deliveries"},
		{append([]string{"--block", "0"}, table...), 2, "--block"},
		{append([]string{"--block", "-1s"}, table...), 2, "--block"},
		{append([]string{"--block", "500us"}, table...), 2, "--block"},
		{append([]string{"--claim-idle", "0"}, table...), 2, "--claim-idle"},
		{append([]string{"--claim-idle", "-5s"}, table...), 2, "--claim-idle"},
		{append([]string{"--claim-every", "0s"}, table...), 2, "--claim-every"},
		{append([]string{"--shutdown-timeout", "0"}, table...), 2, "--shutdown-timeout"},
		{append([]string{"--crash-at", "after-ack"}, table...), 2, "--crash-at"},
		{append([]string{"--pay-within", "-1s"}, table...), 2, "--pay-within"},
		{append([]string{"--sweep-every", "-1s"}, table...), 2, "--sweep-every"},
		{append([]string{"--shutdown-timeout", "-1s"}, table...), 2, "--shutdown-timeout"},
		{append([]string{"--log-level", "loud"}, table...), 2, "--log-level"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := clitest.Command(t, 30*time.Second, tc.args...).CombinedOutput()
			if status := clitest.ExitStatus(t, err); status != tc.status || !strings.Contains(string(out), tc.mentions) {
				t.Fatalf("orderworker %s: exit %d, want %d, saying %q:\n%s", strings.Join(tc.args, " "), status, tc.status, tc.mentions, out)
			}
		})
	}
}
