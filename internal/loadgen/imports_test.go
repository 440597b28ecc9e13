package loadgen

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Each of loadgen's packages says in its doc what it must not import; this
// holds them to it with go list (direct imports). The stores, a Redis
// client and the packages above a part are what a part must not reach.
func TestPackagesKeepTheirImportRules(t *testing.T) {
	const mod = "github.com/lockstep/lockstep/"
	stores := []string{mod + "inventory", mod + "orders", mod + "asyncorders", mod + "segments", "github.com/redis/go-redis/v9", mod + "internal/redisclient"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{"attack", append(slices.Clone(stores), mod+"internal/loadgen", mod+"internal/loadgen/expect")},
		{"expect", append(slices.Clone(stores), mod+"internal/loadgen", mod+"internal/loadgen/attack")},
	} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./"+tc.pkg).Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", tc.pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if slices.Contains(tc.forbidden, imp) {
				t.Errorf("loadgen/%s imports %s, which its package doc forbids", tc.pkg, imp)
			}
		}
	}
}
