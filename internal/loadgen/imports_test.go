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
		// storeview reads the stores' servers for the runner: the runner
		// takes it as its Stores, and none of its parts imports it.
		view = mod + "internal/storeview"
		// shoprules reads the shop's rules in the stores' packages for
		// whoever runs a scenario; loadgen takes them as a plan.Shop.
		rules = mod + "internal/shoprules"
	)
	all := func(sets ...[]string) []string { return slices.Concat(sets...) }
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		// plan takes the shop's limits in the plan.Shop it is given.
		{"plan", all(stores, clients, []string{"net/http", rules, runner, runner + "/attack", runner + "/expect", runner + "/report"})},
		{"attack", all(stores, clients[:2], []string{runner, runner + "/expect"})},
		{"expect", all(stores, clients, []string{runner, runner + "/attack"})},
		{"report", all(clients, []string{"net/http", runner, runner + "/attack", runner + "/expect"})},
		{"timeline", all(stores, clients, []string{runner, runner + "/expect", runner + "/shopapi"})},
		// shopapi decodes the API's answers into the stores' result types
		// (orders.Order) and nothing else of theirs.
		// fault and the runner reach the servers through the Injector and
		// Stores the workshop gives them, and learn which stages are async
		// from its plan.Shop; the stores' result types the shop's API
		// returns (orders.Order, inventory.OrderCounts, asyncorders.Stats)
		// are all they take of the stores; the runner imports only
		// inventory's, for the live page's order counts.
		{".", all(stores[1:], clients[:2], []string{view, rules})},
		{"fault", all([]string{mod + "inventory", mod + "segments"}, clients[:2], []string{view, runner, runner + "/expect"})},
		{"shards", all(stores, clients, []string{view, runner, runner + "/attack", runner + "/fault"})},
		{"progress", all(stores, clients, []string{view, runner, runner + "/fault", runner + "/report"})},
		{"payers", all(stores, clients[:2], []string{view, runner, runner + "/fault"})},
		{"auditpoll", all(stores, clients, []string{view, runner, runner + "/attack", runner + "/fault", runner + "/expect"})},
		{"saletrace", all(stores, clients, []string{view, runner, runner + "/attack", runner + "/fault", runner + "/expect"})},
		{"shopapi", all(stores[:1], stores[2:], clients[:2], []string{runner, runner + "/attack", runner + "/expect"})},
	} {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "./"+strings.TrimPrefix(tc.pkg, ".")).Output()
		if err != nil {
			t.Fatalf("go list ./%s: %v", tc.pkg, err)
		}
		for _, imp := range strings.Fields(string(out)) {
			if slices.Contains(tc.forbidden, imp) {
				t.Errorf("loadgen %s imports %s, which its package doc forbids", tc.pkg, imp)
			}
		}
	}
}
