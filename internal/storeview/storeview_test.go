package storeview

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redistest"
)

func TestLockKeysFindsTheStagesLocksWithTheirTTL(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	for key, ttl := range map[string]time.Duration{
		"lockstep:setnx:{sku-1}:lock":        0,
		"lockstep:setnx:{sku-1}:stock":       0,
		"lockstep:setnx-expire:{sku-1}:lock": time.Minute,
		"lockstep:segmented:{sku-1:3}:lock":  time.Minute,
		"lockstep:segmented:{sku-1:3}:stock": 0,
		"lockstep:segmented:{sku-1:12}:lock": 0,
	} {
		if err := rdb.Set(ctx, key, "x", ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
	v := Open(Addrs{Addr: srv.Addr})
	defer v.Close()
	for _, tc := range []struct {
		stage string
		want  []report.LockKey
	}{
		{"setnx", []report.LockKey{{Key: "lockstep:setnx:{sku-1}:lock", TTLMS: -1}}},
		{"setnx-expire", []report.LockKey{{Key: "lockstep:setnx-expire:{sku-1}:lock", TTLMS: 60000}}},
		{"segmented", []report.LockKey{{Key: "lockstep:segmented:{sku-1:12}:lock", TTLMS: -1}, {Key: "lockstep:segmented:{sku-1:3}:lock", TTLMS: 60000}}},
		{"naive", []report.LockKey{}},
	} {
		got, err := v.LockKeys(ctx, tc.stage)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: got %+v, want %+v", tc.stage, got, tc.want)
		}
		for i := range got {
			// A TTL read a moment after setting it is a little below a minute.
			if got[i].Key != tc.want[i].Key || (tc.want[i].TTLMS == -1) != (got[i].TTLMS == -1) || got[i].TTLMS < tc.want[i].TTLMS-1000 {
				t.Errorf("%s: got %+v, want %+v", tc.stage, got[i], tc.want[i])
			}
		}
	}
}

// TestProbeOutlivesAKillWhileAnFsyncLags: under appendfsync everysec
// Redis answers a write before it writes it to the file while its last
// fsync still runs. A probe written then and a kill right after lost the
// probe in a CI run, which read as a server the kill had emptied (the
// stock was all there). WriteProbe returns only once the file has it.
func TestProbeOutlivesAKillWhileAnFsyncLags(t *testing.T) {
	srv := redistest.StartWithEnv(t, []string{"LD_PRELOAD=" + slowFsync(t), "SLOW_FSYNC_MS=1500"},
		"--appendonly", "yes", "--appendfsync", "everysec")
	rdb := srv.Client(t)
	ctx := context.Background()
	// A write starts the second's fsync; the probe comes while it runs.
	if err := rdb.Set(ctx, "before", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := rdb.InfoMap(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if info["Persistence"]["aof_pending_bio_fsync"] == "1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no fsync started after a write")
		}
		time.Sleep(5 * time.Millisecond)
	}
	v := Open(Addrs{Addr: srv.Addr})
	defer v.Close()
	probe, err := v.WriteProbe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart() // SIGKILL, then the same directory and settings
	kept, err := v.ProbeKept(ctx, probe)
	if err != nil {
		t.Fatal(err)
	}
	if !kept {
		t.Fatal("the probe did not outlive the kill: WriteProbe returned before the append-only file had it")
	}
}

// slowFsync builds testdata/slowfsync.c into a library to preload.
func slowFsync(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("gcc (which -race needs too): %v", err)
		}
		t.Skipf("gcc: %v", err)
	}
	lib := filepath.Join(t.TempDir(), "slowfsync.so")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", lib, filepath.Join("testdata", "slowfsync.c"), "-ldl").CombinedOutput(); err != nil {
		t.Fatalf("build the fsync shim: %v\n%s", err, out)
	}
	return lib
}
