package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/flagenv"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/internal/shop"
)

func TestFlagsFallBackToEnvironment(t *testing.T) {
	env := map[string]string{"LOCKSTEP_TARGET": "http://nginx:80", "LOCKSTEP_REPLICA_URLS": "http://a:1,http://b:2", "LOCKSTEP_ADMIN_TOKEN": "secret", "LOCKSTEP_GRAFANA_URL": "http://grafana:3000"}
	for _, tc := range []struct {
		name       string
		args       []string
		wantTarget string
	}{
		{"environment", nil, "http://nginx:80"},
		{"flag wins", []string{"--target", "http://other:81"}, "http://other:81"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, func(k string) string { return env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if o.target != tc.wantTarget || o.adminToken != "secret" || len(flagenv.List(o.replicaURLs)) != 2 || o.grafanaURL != "http://grafana:3000" {
				t.Errorf("got %+v", o)
			}
		})
	}
}

func TestRenderRewritesTheReportFromJSON(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "report.json")
	report := `{"scenario":"old","redis":{"kind":"redis-server","version":"7.0.15"},"proxy":{"kind":"nginx"},
	"stages":[{"stage":"naive","via":"proxy","replicas":3,"requests":10,"sales":12,"sales_per_sec":100,"oversold":2,
	"timeline":{"bucket_ms":100,"sales":[5,7],"failures":[0,0]}}]}`
	if err := os.WriteFile(src, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "again")
	var stdout bytes.Buffer
	if err := run(context.Background(), []string{"--render", src, "--out", out}, func(string) string { return "" }, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "naive") || !strings.Contains(stdout.String(), "redis-server 7.0.15") {
		t.Errorf("table:\n%s", stdout.String())
	}
	html, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), `data-chart="timeline"`) {
		t.Error("report.html has no sales-over-time chart")
	}
}

// A run whose expectations are not met says so in its error, which main
// turns into exit status 3; one that met them returns nil.
func TestUnmetExpectationsFailTheRun(t *testing.T) {
	srv := redistest.Start(t)
	s, err := shop.New(shop.Config{RedisAddrs: []string{srv.Addr}, Replica: "r0", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	for _, tc := range []struct {
		expect  string
		wantErr error
	}{
		{"no-oversell", nil},
		{"oversells", report.ErrExpectationsNotMet},
	} {
		t.Run(tc.expect, func(t *testing.T) {
			dir := t.TempDir()
			scenario := filepath.Join(dir, "s.yaml")
			body := "name: t\nruns:\n  - stage: atomic\n    stock: 20\n    workers: 2\n    duration: 1s\n    until_sold_out: true\n    expect: [" + tc.expect + "]\n"
			if err := os.WriteFile(scenario, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			err := run(context.Background(), []string{"--target", ts.URL, "--scenario", scenario, "--out", dir}, func(string) string { return "" }, &bytes.Buffer{}, &bytes.Buffer{})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("run = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
