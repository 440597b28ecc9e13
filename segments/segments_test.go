package segments

import (
	"slices"
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

func TestTagKeepsSegmentsApart(t *testing.T) {
	if Tag("sku-1", 7) != "sku-1:7" || Tag("sku-1", 7) == Tag("sku-1", 8) {
		t.Fatalf("Tag = %q, %q", Tag("sku-1", 7), Tag("sku-1", 8))
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
