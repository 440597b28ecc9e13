package lock_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/lock"
	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// The examples' Redis: an Example has no testing.T to start a server, so
// TestMain starts them. redisAddr is the one every example uses;
// redLockAddrs are three independent masters for ExampleNewRedLock.
var (
	redisAddr    string
	redLockAddrs []string
)

// TestMain silences go-redis's dial-failure logging (several tests stop
// Redis on purpose, and the failures they expect are asserted, not logged)
// and starts the examples' redis-servers. The test binary is also a process
// of the lock checker (checker_test.go) when started as one.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	if child, err := lock.CheckerChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(runWithExampleServers(m))
}

// runWithExampleServers runs the tests with three redis-servers for the
// examples and stops them. Without redis-server the examples are skipped,
// as the tests skip, except under CI=true, where it is a failure.
func runWithExampleServers(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lock-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for i := range 3 {
		serverDir := filepath.Join(dir, strconv.Itoa(i))
		if err := os.Mkdir(serverDir, 0o700); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		srv, err := redistest.StartMain(serverDir)
		if errors.Is(err, exec.ErrNotFound) && os.Getenv("CI") != "true" {
			fmt.Fprintf(os.Stderr, "%v: the examples are skipped\n", err)
			flag.Parse()
			skip := "^Example"
			if given := flag.Lookup("test.skip").Value.String(); given != "" {
				skip = given + "|" + skip
			}
			if err := flag.Set("test.skip", skip); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			return m.Run()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer srv.Stop()
		redLockAddrs = append(redLockAddrs, srv.Addr)
	}
	redisAddr = redLockAddrs[0]
	return m.Run()
}
