package proc

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Stat
		wantErr    bool
	}{
		{"plain", "42 (redis-server) S 1 42 42 0 -1 4194560 1 0 0 0 250 150 0 0 20 0 4 0", Stat{State: 'S', PGrp: 42, CPU: 4 * time.Second}, false},
		{"with rss", "42 (etcd) S 1 42 42 0 -1 4194560 1 0 0 0 250 150 0 0 20 0 4 0 100 200000 25", Stat{State: 'S', PGrp: 42, CPU: 4 * time.Second, RSS: 25 * int64(os.Getpagesize())}, false},
		{"spaces and parens in the name", "7 (nginx: worker (x)) Z 6 6 6 0 -1 0 0 0 0 0 3 2 0 0", Stat{State: 'Z', PGrp: 6, CPU: 50 * time.Millisecond}, false},
		{"short", "7 (x) S 1 2", Stat{}, true},
		{"no command", "garbage", Stat{}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(tc.line)
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("parse: %+v, %v; want %+v (error %t)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestGroupAndAlive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !Alive(pid) || !slices.Equal(Group(pid), []int{pid}) {
		t.Errorf("alive %t, group %v; want the sleeping child alone in its group", Alive(pid), Group(pid))
	}
	// Right after fork the child may not have exec'd sleep yet.
	line, err := Cmdline(pid)
	for deadline := time.Now().Add(2 * time.Second); err == nil && line != "sleep 30" && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
		line, err = Cmdline(pid)
	}
	if err != nil || line != "sleep 30" {
		t.Errorf("cmdline %q, %v", line, err)
	}
	if self, err := Read(os.Getpid()); err != nil || !self.Alive() || self.PGrp != syscall.Getpgrp() {
		t.Errorf("own stat %+v, %v; want alive in group %d", self, err, syscall.Getpgrp())
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if Alive(pid) || len(Group(pid)) != 0 {
		t.Errorf("after exit: alive %t, group %v", Alive(pid), Group(pid))
	}
}
