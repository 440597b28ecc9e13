package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/clitest"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
)

func TestMain(m *testing.M) {
	clitest.RunMainIfAsked(main)
	os.Exit(m.Run())
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func startTestShop(t *testing.T) string {
	t.Helper()
	srv := redistest.Start(t)
	s, err := shop.New(shop.Config{RedisAddrs: []string{srv.Addr}, Replica: "r0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Exit: func(int) {}}) // a crash step must not end the test binary
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// Help exits 0; a usage error — a flag, a scenario that does not load, a
// stage the shop does not have — exits 2 before anything runs.
func TestExitStatuses(t *testing.T) {
	target := startTestShop(t)
	misspelt := writeScenario(t, "runs:\n  - stage: atomik\n    expect: [no-oversell]\n")
	noStock := writeScenario(t, "runs:\n  - stage: atomic\n    stock: 0\n")
	for _, tc := range []struct {
		name     string
		args     []string
		status   int
		mentions []string
	}{
		{"help", []string{"--help"}, 0, []string{"-scenario"}},
		{"unknown flag", []string{"--nope"}, 2, []string{"nope"}},
		{"stray argument", []string{"--target", target, "stray"}, 2, []string{"stray"}},
		{"no such scenario", []string{"--target", target, "--scenario", "nosuch.yaml"}, 2, []string{"nosuch.yaml"}},
		{"stock 0", []string{"--target", target, "--scenario", noStock}, 2, []string{"stock"}},
		{"target not a URL", []string{"--target", "127.0.0.1:8080"}, 2, []string{"--target"}},
		{"replica URL not a URL", []string{"--target", target, "--replica-urls", target + ",r2:8080"}, 2, []string{"--replica-urls"}},
		{"redis address without a port", []string{"--target", target, "--redis-addr", "foo"}, 2, []string{"--redis-addr"}},
		{"cluster seed without a port", []string{"--target", target, "--redis-cluster", "foo"}, 2, []string{"--redis-cluster"}},
		{"cluster and addresses", []string{"--target", target, "--redis-cluster", "a:1", "--redis-addr", "b:2"}, 2, []string{"--redis-cluster"}},
		{"grafana URL not a URL", []string{"--target", target, "--grafana-url", "grafana:3000"}, 2, []string{"--grafana-url"}},
		{"grafana token alone", []string{"--target", target, "--grafana-token", "t"}, 2, []string{"--grafana-token"}},
		{"no out", []string{"--target", target, "--out", ""}, 2, []string{"--out"}},
		{"no such report to render", []string{"--render", "nosuch.json"}, 2, []string{"nosuch.json"}},
		{"misspelt stage", []string{"--target", target, "--scenario", misspelt, "--out", t.TempDir()}, 2, []string{`"atomik"`, "atomic", "naive"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := clitest.Command(t, time.Minute, tc.args...).CombinedOutput()
			status := clitest.ExitStatus(t, err)
			if status != tc.status {
				t.Fatalf("loadgen %s: exit %d, want %d:\n%s", strings.Join(tc.args, " "), status, tc.status, out)
			}
			for _, m := range tc.mentions {
				if !strings.Contains(string(out), m) {
					t.Errorf("loadgen %s does not say %q:\n%s", strings.Join(tc.args, " "), m, out)
				}
			}
		})
	}
}

// Ctrl-C during a stage exits 130 and still writes the report, whose row
// keeps its figures, marked interrupted.
func TestInterruptKeepsTheReport(t *testing.T) {
	target := startTestShop(t)
	scenario := writeScenario(t, "runs:\n  - stage: atomic\n    stock: 100000\n    rate: 100\n    duration: 1m\n")
	out := t.TempDir()
	cmd := clitest.Command(t, time.Minute, "--target", target, "--scenario", scenario, "--out", out)
	output, err := os.Create(filepath.Join(t.TempDir(), "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer output.Close()
	cmd.Stdout, cmd.Stderr = output, output
	said := func() string { b, _ := os.ReadFile(output.Name()); return string(b) }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if status := clitest.ExitStatus(t, cmd.Wait()); status != 130 {
		t.Fatalf("exit %d after SIGINT, want 130:\n%s", status, said())
	}
	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatalf("no report.json after SIGINT: %v\n%s", err, said())
	}
	var rep report.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 1 || !rep.Stages[0].Interrupted || rep.Stages[0].Error != "" || rep.Stages[0].Sales == 0 || rep.Stages[0].Audit.Sold != rep.Stages[0].Sales {
		t.Fatalf("report after SIGINT: %+v", rep.Stages)
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Errorf("no report.html after SIGINT: %v", err)
	}
}
