package segments

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n     int
		want  []int64
	}{
		{500, 16, []int64{32, 32, 32, 32, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31}},
		{10, 1, []int64{10}},
		{3, 5, []int64{1, 1, 1, 0, 0}},
		{0, 4, []int64{0, 0, 0, 0}},
	} {
		got, err := Split(tc.total, tc.n)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Split(%d, %d) = %v, %v; want %v", tc.total, tc.n, got, err, tc.want)
		}
		var sum int64
		for _, s := range got {
			sum += s
		}
		if sum != tc.total {
			t.Errorf("Split(%d, %d) adds up to %d", tc.total, tc.n, sum)
		}
	}
}

func TestSplitRejects(t *testing.T) {
	for _, tc := range []struct {
		total int64
		n     int
	}{{10, 0}, {10, -1}, {10, MaxCount + 1}, {-1, 4}} {
		if _, err := Split(tc.total, tc.n); err == nil {
			t.Errorf("Split(%d, %d) accepted", tc.total, tc.n)
		}
	}
}

func TestWalkVisitsEverySegmentOnceFromStart(t *testing.T) {
	got := slices.Collect(Walk(3, 5))
	if want := []int{3, 4, 0, 1, 2}; !slices.Equal(got, want) {
		t.Fatalf("Walk(3, 5) = %v, want %v", got, want)
	}
}

func TestCandidates(t *testing.T) {
	stocks := []int64{0, 5, 1, 0, 2}
	for _, tc := range []struct {
		start int
		qty   int64
		want  []int
	}{
		{0, 1, []int{1, 2, 4}},
		{2, 1, []int{2, 4, 1}},
		{3, 2, []int{4, 1}},
		{0, 6, nil},
	} {
		if got := Candidates(stocks, tc.start, tc.qty); !slices.Equal(got, tc.want) {
			t.Errorf("Candidates(%v, %d, %d) = %v, want %v", stocks, tc.start, tc.qty, got, tc.want)
		}
	}
}

func TestStartIsInRangeAndSpreads(t *testing.T) {
	seen := make(map[int]bool)
	for range 2000 {
		s := Start(8)
		if s < 0 || s >= 8 {
			t.Fatalf("Start(8) = %d", s)
		}
		seen[s] = true
	}
	if len(seen) != 8 {
		t.Fatalf("Start(8) hit only %d of 8 segments in 2000 draws", len(seen))
	}
}

func TestSlotIsClusterKeyslot(t *testing.T) {
	// Values CLUSTER KEYSLOT answers.
	for key, slot := range map[string]int{"foo": 12182, "bar": 5061, "hello": 866, "123456789": 12739} {
		if got := Slot(key); got != slot {
			t.Errorf("Slot(%q) = %d, want %d", key, got, slot)
		}
	}
}

// The n segments of a SKU sit in n equal parts of the slot space (n ≤ 64):
// on three masters with equal ranges, n/3 each, give or take one.
func TestTagsSpreadOverTheSlots(t *testing.T) {
	for _, sku := range []string{"sku-1", "A.b_C-9", "x"} {
		for _, n := range []int{1, 2, 3, 8, 16, 64} {
			perMaster := make([]int, 3)
			seen := make(map[string]bool)
			for i := range n {
				tag := Tag(sku, i, n)
				if seen[tag] || !strings.HasPrefix(tag, sku+":"+strconv.Itoa(i)+":") {
					t.Fatalf("Tag(%q, %d, %d) = %q: not its own", sku, i, n, tag)
				}
				seen[tag] = true
				if slot := Slot(tag); slot < i*slotCount/n || slot >= (i+1)*slotCount/n {
					t.Errorf("Tag(%q, %d, %d) = %q in slot %d, outside part %d", sku, i, n, tag, slot, i)
				}
				perMaster[Slot(tag)*3/slotCount]++
			}
			if slices.Max(perMaster)-slices.Min(perMaster) > 1 {
				t.Errorf("%s, %d segments: %v per master", sku, n, perMaster)
			}
			if Tag(sku, 0, n) != Tag(sku, 0, n) {
				t.Fatal("Tag is not deterministic")
			}
		}
	}
	// Beyond 64 parts are narrower than the window: near their part.
	perMaster := make([]int, 3)
	for i := range MaxCount {
		perMaster[Slot(Tag("sku-1", i, MaxCount))*3/slotCount]++
	}
	if slices.Max(perMaster)-slices.Min(perMaster) > 8 {
		t.Errorf("%d segments: %v per master", MaxCount, perMaster)
	}
}

func BenchmarkTag(b *testing.B) {
	for i := 0; b.Loop(); i++ {
		Tag("sku-1", i%16, 16)
	}
}

func TestCover(t *testing.T) {
	for _, tc := range []struct {
		stocks []int64
		qty    int64
		want   []int
	}{
		{[]int64{1, 1}, 2, []int{0, 1}},       // the 3-unit case after one sale
		{[]int64{0, 3, 1, 2}, 4, []int{1, 3}}, // the fullest first: 3 then 2
		{[]int64{0, 3, 1, 2}, 6, []int{1, 2, 3}},
		{[]int64{2, 1, 2}, 4, []int{0, 2}}, // ties keep index order
		{[]int64{2, 0, 2, 2}, 6, []int{0, 2, 3}},
		{[]int64{5}, 5, []int{0}},
		{[]int64{1, 1, 1}, 4, nil},
		{[]int64{0, 0}, 1, nil},
		{nil, 1, nil},
	} {
		if got := Cover(tc.stocks, tc.qty); !slices.Equal(got, tc.want) {
			t.Errorf("Cover(%v, %d) = %v, want %v", tc.stocks, tc.qty, got, tc.want)
		}
	}
}

func TestTake(t *testing.T) {
	for _, tc := range []struct {
		stocks []int64
		qty    int64
		want   []int64
		ok     bool
	}{
		{[]int64{1, 1}, 2, []int64{1, 1}, true},
		{[]int64{3, 2}, 4, []int64{3, 1}, true},
		{[]int64{3, 2}, 6, []int64{3, 2}, false},
		{[]int64{0, 2}, 1, []int64{0, 1}, true},
	} {
		got, ok := Take(tc.stocks, tc.qty)
		if !slices.Equal(got, tc.want) || ok != tc.ok {
			t.Errorf("Take(%v, %d) = %v, %v; want %v, %v", tc.stocks, tc.qty, got, ok, tc.want, tc.ok)
		}
	}
}
