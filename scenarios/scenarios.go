// Package scenarios holds the workshop's scenario files. They are built into
// cmd/loadgen and cmd/workshop, so they run without a checkout: default.yaml
// (every stage), max-rate.yaml, orders.yaml (the order stages: 一人一单 and
// 乐观锁), and the failure scenarios crash.yaml, pause.yaml,
// redis-restart.yaml, failover.yaml, partition.yaml and orders-down.yaml,
// and spike-bots.yaml (the front door: limiters and the sold-out mark
// against bots).
package scenarios

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/lockstep/lockstep/internal/loadgen"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/shoprules"
)

//go:embed *.yaml
var builtIn embed.FS

// DefaultName is how reports refer to the built-in scenario.
const DefaultName = "scenarios/default.yaml (built in)"

// Names lists the built-in scenarios by name (default, crash, ...).
func Names() []string {
	entries, _ := builtIn.ReadDir(".") // an embed.FS root always reads
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return names
}

// Load reads a scenario: empty is the built-in default; otherwise a file's
// path or a built-in scenario's name (a file of that name wins), or several
// of either separated by commas, whose runs are walked one after the other
// on one set-up. It returns the scenario and the name to report it under.
func Load(spec string) (*plan.Scenario, string, error) {
	if spec == "" {
		spec = "default"
	}
	var (
		merged *plan.Scenario
		names  []string
	)
	for _, item := range strings.Split(spec, ",") {
		sc, name, err := loadOne(strings.TrimSpace(item))
		if err != nil {
			return nil, "", err
		}
		names = append(names, name)
		if merged == nil {
			merged = sc
			continue
		}
		if sc.SKU != merged.SKU {
			return nil, "", fmt.Errorf("scenarios %s sell different SKUs (%s, %s): they cannot share a run", spec, merged.SKU, sc.SKU)
		}
		merged.Name += "+" + sc.Name
		merged.Description = strings.TrimPrefix(merged.Description+"; "+sc.Description, "; ")
		merged.Runs = append(merged.Runs, sc.Runs...)
	}
	return merged, strings.Join(names, ", "), nil
}

func loadOne(item string) (*plan.Scenario, string, error) {
	// A directory of that name (./orders, the package, beside the orders
	// scenario) is no scenario file.
	if fi, err := os.Stat(item); err == nil && !fi.IsDir() || path.Ext(item) != "" {
		sc, err := loadgen.LoadScenario(item, shoprules.Shop())
		return sc, item, err
	}
	data, err := builtIn.ReadFile(item + ".yaml")
	if errors.Is(err, os.ErrNotExist) || !slices.Contains(Names(), item) {
		return nil, "", fmt.Errorf("scenario %q: no such file, and no built-in scenario of that name (built in: %s)", item, strings.Join(Names(), ", "))
	}
	if err != nil {
		return nil, "", fmt.Errorf("built-in scenario %s: %w", item, err)
	}
	sc, err := loadgen.ParseScenario(data, shoprules.Shop())
	if err != nil {
		return nil, "", fmt.Errorf("built-in scenario %s: %w", item, err)
	}
	return sc, "scenarios/" + item + ".yaml (built in)", nil
}
