package keyslot

import "testing"

// The expected slots are CLUSTER KEYSLOT's answers (redis-server 7.0.15).
func TestOf(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"foo", 12182},
		{"{x}:channel", 16287},
		{"{user1000}.following", 3443},
		{"foo{}{bar}", 8363},
		{"foo{{bar}}zap", 4015},
		{"foo{bar}{zap}", 5061},
		{"", 0},
	} {
		if got := Of(tc.key); got != tc.slot {
			t.Errorf("Of(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
}
