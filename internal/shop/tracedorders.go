package shop

import (
	"context"
	"strconv"
	"time"

	"github.com/lockstep/lockstep/internal/redistrace"
	"github.com/lockstep/lockstep/orders"
)

// tracedOrders records the order table's calls of a traced sale beside its
// Redis commands, so the wire trace shows what one sale sends to Redis and
// to the database. Calls outside a traced sale cost a context lookup.
type tracedOrders struct {
	orders.Store
	db string // "mysql" or "sqlite"
}

// record adds one call; reply is "OK" or the error.
func (t tracedOrders) record(ctx context.Context, start time.Time, statement string, args []string, err error) {
	reply := "OK"
	if err != nil {
		reply = "(error) " + err.Error()
	}
	redistrace.Record(ctx, redistrace.Call{Command: "SQL " + t.db, Args: append([]string{statement}, args...), Reply: reply}, time.Since(start))
}

func (t tracedOrders) Insert(ctx context.Context, o orders.Order) error {
	start := time.Now()
	err := t.Store.Insert(ctx, o)
	t.record(ctx, start, "INSERT INTO lockstep_orders", []string{o.ID, o.SKU, o.User, strconv.FormatInt(o.Qty, 10)}, err)
	return err
}

func (t tracedOrders) Void(ctx context.Context, o orders.Order) error {
	start := time.Now()
	err := t.Store.Void(ctx, o)
	t.record(ctx, start, "INSERT INTO lockstep_orders (void)", []string{o.ID}, err)
	return err
}

func (t tracedOrders) HasOrder(ctx context.Context, stage, sku, user string) (bool, error) {
	start := time.Now()
	has, err := t.Store.HasOrder(ctx, stage, sku, user)
	t.record(ctx, start, "SELECT 1 FROM lockstep_orders WHERE user_id = ?", []string{user, "found: " + strconv.FormatBool(has)}, err)
	return has, err
}

func (t tracedOrders) Stock(ctx context.Context, stage, sku string) (orders.Stock, error) {
	start := time.Now()
	st, err := t.Store.Stock(ctx, stage, sku)
	t.record(ctx, start, "SELECT stock FROM lockstep_stock", []string{sku, "stock: " + strconv.FormatInt(st.Stock, 10)}, err)
	return st, err
}

func (t tracedOrders) Buy(ctx context.Context, o orders.Order, cond orders.Condition, read int64) (int64, error) {
	start := time.Now()
	remaining, err := t.Store.Buy(ctx, o, cond, read)
	where := "stock >= " + strconv.FormatInt(o.Qty, 10)
	if cond == orders.SameStock {
		where = "stock = " + strconv.FormatInt(read, 10)
	}
	t.record(ctx, start, "BEGIN; INSERT INTO lockstep_orders; UPDATE lockstep_stock SET stock = stock - q WHERE "+where+"; COMMIT", []string{o.ID}, err)
	return remaining, err
}
