// Package lockservertest starts the lock servers of package lockserver for
// a test and stops them when it ends. Without the server installed the test
// is skipped, except under CI=true, where a missing server is a failure.
package lockservertest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/lockserver"
)

// startTimeout bounds a server's start on a loaded machine.
const startTimeout = 60 * time.Second

// Etcd starts an etcd cluster of n members for t.
func Etcd(t testing.TB, n int) *lockserver.Etcd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	e, err := lockserver.StartEtcd(ctx, t.TempDir(), n)
	check(t, "etcd", err)
	t.Cleanup(e.Stop)
	return e
}

// MariaDB starts a MariaDB server for t.
func MariaDB(t testing.TB) *lockserver.MariaDB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	m, err := lockserver.StartMariaDB(ctx, t.TempDir())
	check(t, "mariadb", err)
	t.Cleanup(m.Stop)
	return m
}

func check(t testing.TB, what string, err error) {
	t.Helper()
	switch {
	case err == nil:
	case errors.Is(err, lockserver.ErrNotInstalled) && os.Getenv("CI") != "true":
		t.Skipf("%s: %v (run `make test`, which installs it)", what, err)
	default:
		t.Fatalf("%s: %v", what, err)
	}
}

// ZooKeeper starts a ZooKeeper ensemble of n members for t.
func ZooKeeper(t testing.TB, n int) *lockserver.ZooKeeper {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	z, err := lockserver.StartZooKeeper(ctx, t.TempDir(), n)
	check(t, "zookeeper", err)
	t.Cleanup(z.Stop)
	return z
}

// Redis starts a redis-server for t.
func Redis(t testing.TB) *lockserver.Redis {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	r, err := lockserver.StartRedis(ctx, t.TempDir())
	check(t, "redis", err)
	t.Cleanup(r.Stop)
	return r
}
