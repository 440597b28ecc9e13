package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/proc"
	"github.com/lockstep/lockstep/internal/redistest"
)

// shortLook is the short look of the package doc and docs/hardening.md,
// word for word.
var shortLook = []string{"--duration", "1m", "--idempotency-ttl", "5s", "--sample", "1s"}

// TestShortSoak runs the documented short look end to end — the workshop
// with redis-server, three shop processes and its proxy, a minute of
// idempotent sales at 200/s — and checks that every check ran and passed,
// flatness included, the figures add up, and no process is left. Only
// where the binaries come from (built once here) and where the output goes
// differ from the command a reader types.
func TestShortSoak(t *testing.T) {
	redistest.Binary(t) // skips (or fails under CI) without redis-server
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	workshopBin, shopBin, err := buildBinaries(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.ArtifactDir(), "soak") // kept with -artifacts: a failure's logs
	const rate, seconds = 200, 60
	var stdout, stderr bytes.Buffer
	runErr := run(ctx, append(slices.Clone(shortLook),
		"--workshop-bin", workshopBin, "--shop-bin", shopBin, "--out", out,
	), &stdout, &stderr)
	data, err := os.ReadFile(filepath.Join(out, "soak.json"))
	if err != nil {
		t.Fatalf("soak: %v (%v)\n%s\n%s", runErr, err, stdout.String(), tail(stderr.String(), 20))
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) < 20 {
		t.Errorf("%d checks, want every one of them", len(rep.Checks))
	}
	for _, c := range rep.Checks {
		if !c.Passed {
			t.Errorf("check failed: %s: %s", c.Name, c.Detail)
		}
	}
	if t.Failed() {
		t.Logf("soak: %v\n%s", runErr, stdout.String())
	}
	// One verdict per shop and series (3 × 3) and four of Redis, each from
	// the samples after the warm-up (5 s + 2 samples).
	if len(rep.Verdicts) != 13 {
		t.Errorf("%d flatness verdicts, want 13", len(rep.Verdicts))
	}
	// A sample is read every second, each taking its own time on a loaded
	// machine (37 of 40 at load 25): most of them, not all.
	if n := len(rep.Samples); n < 3*seconds/4 {
		t.Errorf("%d samples in %d s at 1 per second, want at least %d", n, seconds, 3*seconds/4)
	}
	// The soak's own error budget: on a loaded machine a Redis reply can
	// miss the shops' 300 ms timeout (2 of 2000 did in a CI run at load
	// 20); the failures name each one's answer.
	total := rep.Load.Total
	if total.Requests < rate*seconds*95/100 || total.Replays == 0 || total.unanswered()*1000 > total.Requests {
		t.Errorf("load: %+v, want about %d requests, all but 0.1%% sales or replays; failures: %+v", total, rate*seconds, rep.Load.Failures)
	}
	if sold := rep.Audit.Sold; sold < int64(total.Sales) || sold > int64(total.Sales+total.Unknown) || rep.Idempotency.Keys == 0 {
		t.Errorf("audit %+v, idempotency keys %+v; want sold = the sales answered, plus at most the %d writes of unknown outcome", rep.Audit, rep.Idempotency, total.Unknown)
	}
	for _, want := range []string{"flat: shop-1 rss", "ok   no lock key left after the load", "ok   idempotency keys gone after their TTL"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout.String())
		}
	}
	checkStopped(t, filepath.Join(out, "workshop", "workshop.json"))
}

// checkStopped asserts that the workshop and everything it started exited.
func checkStopped(t *testing.T, statePath string) {
	t.Helper()
	data, err := os.ReadFile(statePath)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		PID      int `json:"pid"`
		Replicas []struct {
			PID int `json:"pid"`
		} `json:"replicas"`
		Proxy struct {
			PIDs []int `json:"pids"`
		} `json:"proxy"`
		Redis struct {
			PIDs []int `json:"pids"`
		} `json:"redis"`
	}
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	pids := append(append([]int{st.PID}, st.Proxy.PIDs...), st.Redis.PIDs...)
	for _, r := range st.Replicas {
		pids = append(pids, r.PID)
	}
	// kill -0 is not enough: it succeeds on a zombie (an orphaned nginx
	// worker waits for init to reap it), and on a busy machine a pid of
	// ours may already name another program (pid_max is 32768 here).
	for _, pid := range pids {
		if !proc.Alive(pid) {
			continue
		}
		if line, err := proc.Cmdline(pid); err == nil && startedByTheWorkshop(line) {
			t.Errorf("process %d still runs after the soak: %s", pid, line)
		}
	}
}

// startedByTheWorkshop reports whether a command line is one of the
// programs the workshop starts.
func startedByTheWorkshop(cmdline string) bool {
	for _, name := range []string{"workshop", "shop", "nginx", "redis-server"} {
		if strings.Contains(cmdline, name) {
			return true
		}
	}
	return false
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-lines):], "\n")
}

func TestFlagsRejectNothingToJudge(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		warmup time.Duration
		ok     bool
	}{
		{nil, 70 * time.Second, true}, // 10 minutes: the 1m TTL and two 5s samples are more than a tenth
		{[]string{"--duration", "30s", "--idempotency-ttl", "5s", "--sample", "1s"}, 7 * time.Second, true},
		{[]string{"--duration", "30s"}, 0, false}, // the 1m TTL's ramp is longer than the run
		{shortLook, 7 * time.Second, true},
		{[]string{"--workshop-bin", "w"}, 0, false},
		{[]string{"--retry-ratio", "1"}, 0, false},
	} {
		o, err := parseFlags(tc.args, &bytes.Buffer{})
		if (err == nil) != tc.ok || (tc.ok && o.warmup != tc.warmup) {
			t.Errorf("%v: warm-up %v, err %v; want %v, ok %t", tc.args, o.warmup, err, tc.warmup, tc.ok)
		}
	}
}
