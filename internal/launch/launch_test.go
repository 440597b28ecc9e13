package launch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/nginx"
)

// Stop ends the child and everything it forked: the group is empty after.
func TestStopEndsTheWholeProcessGroup(t *testing.T) {
	dir := t.TempDir()
	// The shell ignores SIGTERM and forks a sleep: only the group kill
	// after the grace ends them both.
	p, err := Start("sh", "/bin/sh", []string{"-c", `trap "" TERM; sleep 60 & echo $! > ` + filepath.Join(dir, "child") + `; wait`}, nil, filepath.Join(dir, "sh.log"))
	if err != nil {
		t.Fatal(err)
	}
	var child int
	for deadline := time.Now().Add(5 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(dir, "child"))
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if child == 0 {
		t.Fatal("the shell did not start its child")
	}
	p.Stop(syscall.SIGTERM)
	if !p.Exited() {
		t.Fatal("Stop returned before the process exited")
	}
	if pids := proc.Group(p.Pid()); len(pids) > 0 {
		t.Fatalf("processes of the group left after Stop: %v", pids)
	}
	// Gone, or a zombie its new parent has not reaped yet.
	if st, err := proc.Read(child); err == nil && st.Alive() {
		t.Fatalf("the forked sleep (pid %d) outlived Stop: state %c", child, st.State)
	}
}

// WaitHTTPReady ends at once when failed says so, and waits while an
// endpoint answers anything but 200.
func TestWaitHTTPReady(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(srv.Close)

	gone := errors.New("exited")
	start := time.Now()
	if err := WaitHTTPReady(context.Background(), srv.URL, func() error { return gone }); !errors.Is(err, gone) {
		t.Fatalf("WaitHTTPReady = %v, want %v", err, gone)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a failed child was waited for %v", took)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := WaitHTTPReady(ctx, srv.URL, nil); err == nil || !strings.Contains(err.Error(), "status 503") {
		t.Fatalf("WaitHTTPReady on a 503 = %v, want the wait's end with the last status", err)
	}
	status = http.StatusOK
	if err := WaitHTTPReady(context.Background(), srv.URL, nil); err != nil {
		t.Fatal(err)
	}
}

// StartNginx runs the project's nginx.conf in a private prefix, in front of
// an upstream, and SIGQUIT stops it with its workers.
func TestStartNginxProxiesToItsUpstream(t *testing.T) {
	bin, err := NginxBinary()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v (CI=true: the test command must install it)", err)
		}
		t.Skip(err)
	}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Replica", "upstream")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(upstream.Close)
	n, err := StartNginx(context.Background(), bin, t.TempDir(), nginx.Config{
		Upstreams: []string{strings.TrimPrefix(upstream.URL, "http://")}, WorkerProcesses: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(syscall.SIGQUIT) })
	res, err := http.Get(n.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := res.Header.Get("X-Replica"); res.StatusCode != http.StatusOK || got != "upstream" {
		t.Fatalf("through nginx: %d, X-Replica %q; want 200 from the upstream", res.StatusCode, got)
	}
	if len(proc.Group(n.Pid())) < 2 {
		t.Fatalf("nginx's group %v: want its master and a worker", proc.Group(n.Pid()))
	}
	n.Stop(syscall.SIGQUIT)
	if pids := proc.Group(n.Pid()); len(pids) > 0 {
		t.Fatalf("nginx processes left after Stop: %v", pids)
	}
}
