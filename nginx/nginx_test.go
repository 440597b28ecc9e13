package nginx

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestRenderPassesNginxSyntaxCheck(t *testing.T) {
	var b strings.Builder
	err := Render(&b, Config{Listen: "127.0.0.1:18080", Upstreams: []string{"127.0.0.1:18081", "127.0.0.1:18082"}, WorkerProcesses: 1})
	if err != nil {
		t.Fatal(err)
	}
	conf := b.String()
	for _, want := range []string{"listen 127.0.0.1:18080;", "server 127.0.0.1:18081 max_fails=1", "server 127.0.0.1:18082 max_fails=1", "worker_processes 1;"} {
		if !strings.Contains(conf, want) {
			t.Errorf("rendered config lacks %q:\n%s", want, conf)
		}
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx not installed (CI=true: the test command must install it)")
		}
		t.Skip("nginx not installed")
	}
	prefix := t.TempDir()
	for _, d := range []string{"logs", "tmp"} {
		if err := os.MkdirAll(filepath.Join(prefix, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(prefix, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-t", "-p", prefix, "-c", path).CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -t: %v\n%s\n%s", err, out, conf)
	}
}

func TestRenderRejectsMissingFields(t *testing.T) {
	for _, c := range []Config{
		{Upstreams: []string{"a:1"}, WorkerProcesses: 1},
		{Listen: "a:1", WorkerProcesses: 1},
		{Listen: "a:1", Upstreams: []string{"a:2"}},
	} {
		if err := Render(&strings.Builder{}, c); err == nil {
			t.Errorf("Render(%+v) succeeded", c)
		}
	}
}
