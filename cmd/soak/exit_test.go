package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/clitest"
)

func TestMain(m *testing.M) {
	clitest.RunMainIfAsked(main)
	os.Exit(m.Run())
}

// Asking for the usage is no failure (0); every flag's bad value is a
// usage error (2) before the soak builds or starts anything.
func TestExitStatuses(t *testing.T) {
	notExecutable := filepath.Join(t.TempDir(), "shop")
	if err := os.WriteFile(notExecutable, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		status   int
		mentions string
	}{
		{[]string{"--help"}, 0, "-duration"},
		{[]string{"--nope"}, 2, "nope"},
		{[]string{"stray"}, 2, "stray"},
		{[]string{"--duration", "0s"}, 2, "--duration"},
		{[]string{"--duration", "soon"}, 2, "soon"},
		{[]string{"--sample", "0s"}, 2, "--sample"},
		{[]string{"--idempotency-ttl", "0s"}, 2, "--idempotency-ttl"},
		{[]string{"--warmup", "-1s"}, 2, "--warmup"},
		{[]string{"--duration", "30s"}, 2, "warm-up"},
		{[]string{"--rate", "0"}, 2, "--rate"},
		{[]string{"--workers", "0"}, 2, "--workers"},
		{[]string{"--replicas", "0"}, 2, "--replicas"},
		{[]string{"--segments", "0"}, 2, "--segments"},
		{[]string{"--retry-ratio", "1"}, 2, "--retry-ratio"},
		{[]string{"--faults", "work=2ms"}, 2, "--faults"},
		{[]string{"--out", ""}, 2, "--out"},
		{[]string{"--workshop-bin", os.Args[0]}, 2, "--shop-bin"},
		{[]string{"--workshop-bin", os.Args[0], "--shop-bin", notExecutable}, 2, "--shop-bin"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, err := clitest.Command(t, 30*time.Second, tc.args...).CombinedOutput()
			if status := clitest.ExitStatus(t, err); status != tc.status || !strings.Contains(string(out), tc.mentions) || strings.Contains(string(out), "building") {
				t.Fatalf("soak %s: exit %d, want %d before anything starts, saying %q:\n%s", strings.Join(tc.args, " "), status, tc.status, tc.mentions, out)
			}
		})
	}
}
