// Package childproctest checks that the processes a test starts die with
// the test process: a test runs its own test binary as a helper that starts
// them, kills the helper with SIGKILL (nothing of it runs after: no
// cleanup, no deferred Stop) and finds none of them left.
package childproctest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/proc"
)

const env = "CHILDPROCTEST_HELPER"

// IsHelper reports whether this test process is a helper started by
// KillHelper; a helper test skips otherwise.
func IsHelper() bool { return os.Getenv(env) == "1" }

// Report prints the helper's processes for KillHelper and blocks until the
// helper is killed.
func Report(pids ...int) {
	for _, pid := range pids {
		fmt.Printf("pid %d\n", pid)
	}
	fmt.Println("ready")
	select {}
}

// KillHelper runs the test binary's test helper (which calls Report), kills
// it with SIGKILL once it reported, and fails t unless every process it
// reported was alive before and is gone within ten seconds after.
func KillHelper(t *testing.T, helper string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+helper+"$", "-test.v", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var pids []int
	var lines []string
	for sc := bufio.NewScanner(out); sc.Scan(); {
		line := sc.Text()
		lines = append(lines, line)
		if line == "ready" {
			break
		}
		if rest, ok := strings.CutPrefix(line, "pid "); ok {
			pid, err := strconv.Atoi(rest)
			if err != nil {
				t.Fatalf("helper said %q", line)
			}
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("the helper %s reported no process:\n%s", helper, strings.Join(lines, "\n"))
	}
	for _, pid := range pids {
		if !proc.Alive(pid) {
			t.Fatalf("process %d was not alive before the helper was killed", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for proc.Alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, pid := range pids {
		if proc.Alive(pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL) // leave nothing behind ourselves
			t.Errorf("process %d outlived the killed test process (helper %s)", pid, helper)
		}
	}
}
