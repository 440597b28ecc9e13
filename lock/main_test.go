package lock

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// TestMain silences go-redis's dial-failure logging: several tests stop
// Redis on purpose, and the failures they expect are asserted, not logged.
// The test binary is also a process of the lock checker when started as one.
func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{})
	if child, err := ckChild(); child {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
