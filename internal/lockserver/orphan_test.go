package lockserver_test

import (
	"testing"

	"github.com/lockstep/lockstep/internal/childproc/childproctest"
	"github.com/lockstep/lockstep/internal/lockserver/lockservertest"
)

// A test process killed outright (SIGKILL, or go test's -timeout) runs no
// Stop: its servers must die with it all the same.
func TestServersDieWithTheTestProcess(t *testing.T) {
	lockservertest.Etcd(t, 1).Stop() // skips (or fails under CI) without etcd, like the helper
	childproctest.KillHelper(t, "TestHelperServers")
}

// TestHelperServers starts an etcd member, a Redis and its replica, and
// reports them.
func TestHelperServers(t *testing.T) {
	if !childproctest.IsHelper() {
		t.Skip("a helper of TestServersDieWithTheTestProcess")
	}
	e := lockservertest.Etcd(t, 1)
	r := lockservertest.Redis(t)
	replica, err := r.StartReplica(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	childproctest.Report(e.Pid(0), r.Pid(), replica.Pid())
}
