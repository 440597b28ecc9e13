package storeview

import (
	"context"
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
