package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockstep/lockstep/asyncorders"
	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/redistest"
	"github.com/lockstep/lockstep/orders"
)

// heldRows counts the dead worker's entries whose rows are written, and
// refuses to count when another worker claimed one of them while the rows
// were read (the late answer of HeldBy): a row the claimer wrote would be
// counted as the dead worker's.
func TestHeldRowsCountsTheDeadWorkersRowsOrSaysTheyMoved(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client(t)
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
			q := asyncorders.NewQueue(rdb, asyncorders.StageStream)
			if err := q.Reset(ctx, "sku-1", 10); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := range 3 {
				m := asyncorders.Message{OrderID: orders.NewID(), SKU: "sku-1", User: fmt.Sprintf("b%d", i), Qty: 1, Replica: "r", Admitted: time.Now()}
				if _, err := q.Admit(ctx, m, true); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, m.OrderID)
			}
			read, err := rdb.XReadGroup(ctx, &redis.XReadGroupArgs{Group: asyncorders.Group, Consumer: "dead",
				Streams: []string{q.Stream("sku-1"), ">"}, Count: 10}).Result()
			if err != nil {
				t.Fatal(err)
			}
			shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.claimMidway {
					if err := rdb.XClaim(ctx, &redis.XClaimArgs{Stream: q.Stream("sku-1"), Group: asyncorders.Group, Consumer: "alive",
						Messages: []string{read[0].Messages[0].ID}}).Err(); err != nil {
						t.Error(err)
					}
				}
				// The dead worker wrote the first entry's row only.
				_ = json.NewEncoder(w).Encode(map[string]any{"orders": []orders.Order{{ID: ids[0], User: "b0", Qty: 1}}})
			}))
			defer shop.Close()
			st := &faultState{r: &runner{cfg: Config{Target: shop.URL}, shop: newShopClient(""), rdb: rdb},
				run: plan.RunSpec{Stage: asyncorders.StageStream}}
			held, rows, err := st.heldRows(ctx, q, "sku-1", "dead")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%d held, %d rows, %v; want an error saying %q", held, rows, err, tc.wantErr)
				}
				return
			}
			if err != nil || held != tc.held || rows != tc.rows {
				t.Fatalf("%d held, %d rows, %v; want %d, %d", held, rows, err, tc.held, tc.rows)
			}
		})
	}
}
