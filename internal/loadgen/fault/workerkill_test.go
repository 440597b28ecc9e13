package fault

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/lockstep/lockstep/internal/loadgen/shopapi"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/orders"
)

// heldRows counts the dead worker's entries whose rows are written, and
// refuses to count when another worker claimed one of them while the rows
// were read (the late answer of HeldEntries): a row the claimer wrote would
// be counted as the dead worker's.
func TestHeldRowsCountsTheDeadWorkersRowsOrSaysTheyMoved(t *testing.T) {
	ctx := context.Background()
	ids := []string{orders.NewID(), orders.NewID(), orders.NewID()}
	var held []HeldEntry
	for i, id := range ids {
		held = append(held, HeldEntry{Entry: fmt.Sprintf("1-%d", i), OrderID: id, Deliveries: 1})
	}
	for _, tc := range []struct {
		name        string
		claimMidway bool
		wantErr     string
		held, rows  int64
	}{
		{name: "held still", held: 3, rows: 1},
		{name: "claimed while its rows were read", claimMidway: true, wantErr: "another worker took them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inj := &heldInjector{lists: [][]HeldEntry{held, held}}
			if tc.claimMidway { // the second read no longer has the first entry
				inj.lists[1] = held[1:]
			}
			shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				// The dead worker wrote the first entry's row only.
				_ = json.NewEncoder(w).Encode(map[string]any{"orders": []orders.Order{{ID: ids[0], User: "b0", Qty: 1}}})
			}))
			defer shop.Close()
			st := &Step{env: &Env{Target: shop.URL, Injector: inj, Shop: shopapi.New("")},
				run: plan.RunSpec{Stage: "async-stream"}}
			held, rows, err := heldRows(ctx, st, "sku-1", "dead")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%d held, %d rows, %v; want an error saying %q", held, rows, err, tc.wantErr)
				}
				return
			}
			if err != nil || held != tc.held || rows != tc.rows {
				t.Fatalf("%d held, %d rows, %v; want %d, %d", held, rows, err, tc.held, tc.rows)
			}
			if inj.reads != 2 {
				t.Errorf("%d reads of what the worker held, want 2 (before and after its rows)", inj.reads)
			}
		})
	}
}

// heldInjector answers HeldEntries with lists, one a call; the rest of the
// Injector is not called by heldRows.
type heldInjector struct {
	Injector
	lists [][]HeldEntry
	reads int
}

func (h *heldInjector) HeldEntries(_ context.Context, stage, sku, worker string) ([]HeldEntry, error) {
	if stage != "async-stream" || sku != "sku-1" || worker != "dead" {
		return nil, fmt.Errorf("held entries of %s %s %s", stage, sku, worker)
	}
	h.reads++
	return h.lists[h.reads-1], nil
}
