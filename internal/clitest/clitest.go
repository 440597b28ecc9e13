// Package clitest runs a command's main in its own test binary, so a test
// can see the exit status and output the command really has: the test
// binary starts itself again, and the package's TestMain runs main
// instead of the tests (RunMainIfAsked).
package clitest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"
)

// runMainEnv asks a test binary to run the command's main.
const runMainEnv = "LOCKSTEP_RUN_MAIN"

// RunMainIfAsked runs main and exits 0 after it when the test binary was
// started by Command; a TestMain calls it first.
func RunMainIfAsked(main func()) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
}

// Command is the command's main with args, in this test binary; it is
// killed after timeout, should it run what it should refuse.
func Command(t *testing.T, timeout time.Duration, args ...string) *exec.Cmd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// ExitStatus is the exit status of the command whose Run or Wait
// returned err.
func ExitStatus(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatal(err)
	return 0
}
