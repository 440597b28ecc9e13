package orderchecker

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A defect the checker must find: one fix taken out of the shop and the
// workers (old replaced by new, once, in file; a go build -overlay), and a
// seed at which the checker finds it within defaultTime.
type checkerProof struct {
	name           string
	seed           uint64
	file, old, new string
}

var checkerProofs = []checkerProof{{
	// A lost reply of a deduction script is neither sent again nor given
	// back: the unit is lost (undersold), the buyer of one-per-user-lua
	// refused for good.
	name: "lost deduction reply", seed: 10, file: "inventory/orderseller.go",
	old: "if !errors.Is(err, ErrOutcomeUnknown) {\n\t\t\treturn nil, err // refused: it ran nothing",
	new: "if true {\n\t\t\treturn nil, err // refused: it ran nothing",
}}

// TestOrderCheckerFindsDefects shows that the checker finds, by itself,
// defects of the class it is there for.
func TestOrderCheckerFindsDefects(t *testing.T) {
	if testing.Short() {
		t.Skip("a checker run per defect")
	}
	for _, p := range checkerProofs {
		t.Run(p.name, func(t *testing.T) {
			_, vs := runOrderChecker(t, p.seed, defaultTime, allFaults, overlay(t, p))
			if len(vs) == 0 {
				t.Fatalf("the checker (seed %d, %v) did not find it", p.seed, defaultTime)
			}
			t.Logf("found: %d violations, the first: %s", len(vs), vs[0].what)
		})
	}
}

// overlay writes p's mutated file and the go build -overlay file naming it.
func overlay(t *testing.T, p checkerProof) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", p.file))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), p.old); n != 1 {
		t.Fatalf("%s: %q found %d times, not once", p.file, p.old, n)
	}
	dir := t.TempDir()
	mutated := filepath.Join(dir, filepath.Base(p.file))
	if err := os.WriteFile(mutated, []byte(strings.Replace(string(src), p.old, p.new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]map[string]string{"Replace": {path: mutated}})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
