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
	var (
		stores  = []string{mod + "inventory", mod + "orders", mod + "asyncorders", mod + "segments"}
		clients = []string{"github.com/redis/go-redis/v9", mod + "internal/redisclient", "github.com/tsenart/vegeta/v12/lib"}
		runner  = mod + "internal/loadgen"
	)
	all := func(sets ...[]string) []string { return slices.Concat(sets...) }
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		// plan reads the shop's limits from inventory and segments for now.
		{"plan", all(clients, []string{"net/http", runner, runner + "/attack", runner + "/expect", runner + "/report"})},
		{"attack", all(stores, clients[:2], []string{runner, runner + "/expect"})},
		{"expect", all(stores, clients, []string{runner, runner + "/attack"})},
		{"report", all(clients, []string{"net/http", runner, runner + "/attack", runner + "/expect"})},
		{"timeline", all(stores, clients, []string{runner, runner + "/expect", runner + "/shopapi"})},
		// shopapi decodes the API's answers into the stores' result types
		// (orders.Order) and nothing else of theirs.
		{"shopapi", all(stores[:1], stores[2:], clients[:2], []string{runner, runner + "/attack", runner + "/expect"})},
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
