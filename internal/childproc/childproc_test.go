package childproc_test

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/childproc"
	"github.com/lockstep/lockstep/internal/childproc/childproctest"
	"github.com/lockstep/lockstep/internal/proc"
)

func TestChildDiesWithItsParent(t *testing.T) {
	childproctest.KillHelper(t, "TestHelperStartFromAnEndingThread")
}

// TestHelperStartFromAnEndingThread starts children from goroutines whose
// threads end right after (locked, they exit): the children must live on,
// and die with this process only. Three: a goroutine locked to the main
// thread does not end it.
func TestHelperStartFromAnEndingThread(t *testing.T) {
	if !childproctest.IsHelper() {
		t.Skip("a helper of TestChildDiesWithItsParent")
	}
	var pids []int
	for range 3 {
		started := make(chan int)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			cmd := exec.Command("sleep", "300")
			if _, err := childproc.Start(cmd, syscall.SIGKILL); err != nil {
				t.Error(err)
				close(started)
				return
			}
			started <- cmd.Process.Pid
		}()
		pid, ok := <-started
		if !ok {
			return
		}
		pids = append(pids, pid)
	}
	time.Sleep(300 * time.Millisecond) // the starting threads are gone by now
	for _, pid := range pids {
		if !proc.Alive(pid) {
			t.Fatalf("the child %d died with the thread of the goroutine that started it", pid)
		}
	}
	childproctest.Report(pids...)
}

func TestStartError(t *testing.T) {
	if _, err := childproc.Start(exec.Command("/nonexistent/binary"), syscall.SIGKILL); err == nil {
		t.Fatal("started a binary that does not exist")
	}
}
