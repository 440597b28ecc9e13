package saletrace

import (
	"slices"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/internal/redistrace"
)

func TestWhatATracedSaleShows(t *testing.T) {
	lockCall := func(key, script, reply string) redistrace.Call {
		return redistrace.Call{Command: "EVALSHA", Script: script, Keys: []string{key}, Reply: reply}
	}
	for _, tc := range []struct {
		name  string
		calls []redistrace.Call
		want  []string
	}{
		{"no lock", []redistrace.Call{{Command: "GET", Keys: []string{"lockstep:naive:{sku-1}:stock"}}}, nil},
		{"lock and release", []redistrace.Call{
			lockCall("lockstep:watchdog:{sku-1}:lock", "lock.lua", "OK"),
			lockCall("lockstep:watchdog:{sku-1}:lock", "release.lua", "1"),
		}, []string{showsAcquire, showsRelease}},
		{"a renewal meanwhile", []redistrace.Call{
			lockCall("lockstep:watchdog:{sku-1}:lock", "lock.lua", "OK"),
			{Command: "EVALSHA", Script: "renew.lua", Keys: []string{"lockstep:watchdog:{sku-1}:lock"}, Background: true},
			lockCall("lockstep:watchdog:{sku-1}:lock", "unlock.lua", "1"),
		}, []string{showsAcquire, showsRelease, showsRenewal}},
		{"a segment walked past", []redistrace.Call{
			lockCall("lockstep:segmented:{sku-1:3}:lock", "lock.lua", "187"),
			lockCall("lockstep:segmented:{sku-1:4}:lock", "lock.lua", "OK"),
			lockCall("lockstep:segmented:{sku-1:4}:lock", "release.lua", "1"),
		}, []string{showsAcquire, showsRelease, showsWalkedPast}},
		{"a plain DEL releases", []redistrace.Call{
			{Command: "SET", Keys: []string{"lockstep:setnx:{sku-1}:lock"}},
			{Command: "DEL", Keys: []string{"lockstep:setnx:{sku-1}:lock"}},
		}, []string{showsAcquire, showsRelease}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &report.SaleTrace{Calls: tc.calls}
			if got := showsOf(tr); !slices.Equal(got, tc.want) {
				t.Errorf("shows %v, want %v", got, tc.want)
			}
		})
	}
}
