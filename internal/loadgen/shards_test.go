package loadgen

import "testing"

func TestBusiestShare(t *testing.T) {
	for _, c := range []struct {
		name    string
		shards  []ShardLoad
		share   float64
		masters int
	}{
		{"no cluster", nil, 0, 0},
		{"no commands", []ShardLoad{{Addr: "a"}, {Addr: "b"}}, 0, 2},
		{"one hot key", []ShardLoad{{Addr: "a", Commands: 990}, {Addr: "b", Commands: 6}, {Addr: "c", Commands: 4}}, 0.99, 3},
		{"spread", []ShardLoad{{Addr: "a", Commands: 40}, {Addr: "b", Commands: 30}, {Addr: "c", Commands: 30}}, 0.4, 3},
	} {
		r := StageRun{Shards: c.shards}
		if share, masters := r.BusiestShare(); share != c.share || masters != c.masters {
			t.Errorf("%s: BusiestShare() = %v, %d; want %v, %d", c.name, share, masters, c.share, c.masters)
		}
	}
}
