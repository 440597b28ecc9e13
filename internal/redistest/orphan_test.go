package redistest_test

import (
	"testing"

	"github.com/lockstep/lockstep/internal/childproc/childproctest"
	"github.com/lockstep/lockstep/internal/redistest"
)

// A test process killed outright (SIGKILL, or go test's -timeout) runs no
// cleanup: its servers must die with it all the same.
func TestServersDieWithTheTestProcess(t *testing.T) {
	redistest.Binary(t)
	childproctest.KillHelper(t, "TestHelperServers")
}

// TestHelperServers starts a server with Start, one with StartMain, and
// one restarted, and reports them.
func TestHelperServers(t *testing.T) {
	if !childproctest.IsHelper() {
		t.Skip("a helper of TestServersDieWithTheTestProcess")
	}
	a, b := redistest.Start(t), redistest.Start(t)
	b.Restart()
	c, err := redistest.StartMain(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	childproctest.Report(a.Pid(), b.Pid(), c.Pid())
}
