package sharedcheck

import (
	"path/filepath"
	"testing"
)

// Two mappings of one file see each other's counters: an entry through
// one while the other is inside the same slot is an overlap; another slot
// is not.
func TestMappingsShareTheCounters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "check")
	a, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.Enter(3)
	b.Enter(4)
	if a.Overlaps() != 0 {
		t.Fatalf("overlaps across slots: %d", a.Overlaps())
	}
	if a.Peak(3) != 1 {
		t.Fatalf("peak %d before the overlap, want 1", a.Peak(3))
	}
	b.Enter(3)
	b.Leave(3)
	a.Leave(3)
	b.Leave(4)
	if a.Overlaps() != 1 || b.Overlaps() != 1 {
		t.Fatalf("overlaps = %d, %d; want 1 seen through both mappings", a.Overlaps(), b.Overlaps())
	}
	if a.Peak(3) != 2 || b.Peak(4) != 1 || a.Peak(5) != 0 {
		t.Fatalf("peaks %d, %d, %d; want 2 where two were inside, 1 alone, 0 never entered", a.Peak(3), b.Peak(4), a.Peak(5))
	}
}
