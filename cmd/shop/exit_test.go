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
		{[]string{"--addr", "nowhere"}, 2, "--addr"},
		{[]string{"--redis-addr", "foo"}, 2, "--redis-addr"},
		{[]string{"--redis-addr", ""}, 2, "--redis-addr"},
		{[]string{"--redis-sentinel", "a:1"}, 2, "--redis-master"},
		{[]string{"--redis-cluster", "a:1,b"}, 2, "--redis-cluster"},
		{[]string{"--holders-redis-addr", "h"}, 2, "--holders-redis-addr"},
		{[]string{"--mysql-dsn", "nope"}, 2, "--mysql-dsn"},
		{[]string{"--etcd-endpoints", "127.0.0.1:2379"}, 2, "--etcd-endpoints"},
		{[]string{"--zookeeper-servers", "zk"}, 2, "--zookeeper-servers"},
		{[]string{"--redis-db", "-1"}, 2, "--redis-db"},
		{[]string{"--redis-timeout", "0s"}, 2, "--redis-timeout"},
		{[]string{"--redis-pool-size", "0"}, 2, "--redis-pool-size"},
		{[]string{"--replica", ""}, 2, "--replica"},
		{[]string{"--default-stock", "-1"}, 2, "--default-stock"},
		{[]string{"--segments", "0"}, 2, "--segments"},
		{[]string{"--lock-wait", "-1s"}, 2, "--lock-wait"},
		{[]string{"--request-timeout", "0s"}, 2, "--request-timeout"},
		{[]string{"--idempotency-ttl", "0s"}, 2, "--idempotency-ttl"},
		{[]string{"--shutdown-timeout", "-1s"}, 2, "--shutdown-timeout"},
		{[]string{"--redis-password", "x", "--admin-token", "y", "--orders-sqlite", "z", "--addr", "nowhere"}, 2, "--addr"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := clitest.Command(t, 30*time.Second, tc.args...).CombinedOutput()
			if status := clitest.ExitStatus(t, err); status != tc.status || !strings.Contains(string(out), tc.mentions) {
				t.Fatalf("shop %s: exit %d, want %d, saying %q:\n%s", strings.Join(tc.args, " "), status, tc.status, tc.mentions, out)
			}
		})
	}
}
