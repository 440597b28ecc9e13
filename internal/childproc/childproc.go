// Package childproc starts the server processes of tests and tools so that
// they die with the process that started them, however it ends: a test
// binary ended by go test's -timeout, killed with SIGKILL or crashed leaves
// no redis-server, etcd, ZooKeeper or MariaDB behind.
//
// Linux's parent-death signal (PR_SET_PDEATHSIG) fires when the thread that
// forked the child exits, not only its process, and Go ends a thread when a
// goroutine locked to it exits without unlocking. So Start forks and waits
// on one goroutine locked to its thread for the child's whole life: that
// thread lives exactly as long as the child, or dies with this process.
package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
)

// Start starts cmd with sig as its parent-death signal (keeping the rest of
// cmd.SysProcAttr) and returns a channel that receives cmd.Wait's result
// once the child has exited. The caller must not call cmd.Wait itself.
func Start(cmd *exec.Cmd, sig syscall.Signal) (<-chan error, error) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() { // owned by the child: returns once it has exited
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			runtime.UnlockOSThread()
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
		// Still locked: the thread ends with this goroutine; the child is gone.
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
