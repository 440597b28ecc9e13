package asyncorders

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockstep/lockstep/orders"
)

// maxQty bounds a message's quantity: the order table's qty is an INT.
const maxQty = 1 << 20

// maxReplica is the order table's replica width.
const maxReplica = 128

// parse reads a stream entry of sku as a Message, or says what is wrong
// with it: an entry written by hand goes to the dead letters with that
// reason instead of stopping a worker.
func parse(sku string, values map[string]any) (Message, error) {
	field := func(name string) (string, error) {
		v, ok := values[name].(string)
		if !ok {
			return "", fmt.Errorf("field %q missing", name)
		}
		return v, nil
	}
	var errs []error
	m := Message{SKU: sku}
	var err error
	if m.OrderID, err = field("id"); err == nil {
		if b, herr := hex.DecodeString(m.OrderID); herr != nil || len(b) != 16 {
			err = fmt.Errorf("id %q is not 32 hex digits", m.OrderID)
		}
	}
	errs = append(errs, err)
	if m.User, err = field("user"); err == nil {
		err = orders.ValidateUser(m.User)
	}
	errs = append(errs, err)
	qty, err := field("qty")
	if err == nil {
		if m.Qty, err = strconv.ParseInt(qty, 10, 64); err != nil || m.Qty < 1 || m.Qty > maxQty {
			err = fmt.Errorf("qty %q is not a whole number from 1 to %d", qty, maxQty)
		}
	}
	errs = append(errs, err)
	if m.Replica, err = field("replica"); err == nil && len(m.Replica) > maxReplica {
		err = fmt.Errorf("replica longer than %d bytes", maxReplica)
	}
	errs = append(errs, err)
	at, err := field("at")
	if err == nil {
		var us int64
		if us, err = strconv.ParseInt(at, 10, 64); err != nil {
			err = fmt.Errorf("at %q is not unix microseconds", at)
		}
		m.Admitted = time.UnixMicro(us)
	}
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return Message{}, err
	}
	return m, nil
}

// order is the row m makes on stage; the buyer is in the unique index, the
// backstop behind the admission script's buyer set.
func (m Message) order(stage string) orders.Order {
	return orders.Order{ID: m.OrderID, Stage: stage, SKU: m.SKU, User: m.User, Qty: m.Qty,
		Replica: m.Replica, Created: m.Admitted, Status: orders.StatusLive, OnePerUser: true}
}
