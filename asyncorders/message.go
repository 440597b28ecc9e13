package asyncorders

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/lockstep/lockstep/orders"
)

// maxQty bounds a message's quantity: the order table's qty is an INT.
const maxQty = 1 << 20

// maxReplica is the order table's replica width.
const maxReplica = 128

// orderField is the stream entry's message field. Its value is
//
//	<order id> <qty> <user>\n<replica>
//
// The user has no control characters (orders.ValidateUser), so it ends at
// the newline; the replica, any bytes, is the rest. The admission time is
// not in it: it is the entry id's milliseconds, Redis's clock. One field,
// not five: every field is two more arguments the admission script passes
// through Lua into XADD (BENCHMARKS.md).
const orderField = "order"

// roundField is the entry's second field: the SKU's reset round the units
// were taken in, which admit.lua reads from Redis itself. An entry without
// it (appended before the rounds were) is of round 0, the round of a SKU
// no reset has moved on.
const roundField = "round"

// encode is m's value of orderField.
func (m Message) encode() string {
	return m.OrderID + " " + strconv.FormatInt(m.Qty, 10) + " " + m.User + "\n" + m.Replica
}

// parse reads stream entry id of sku as a Message, or says what is wrong
// with it: an entry written by hand goes to the dead letters with that
// reason instead of stopping a worker.
func parse(sku, id string, values map[string]any) (Message, error) {
	v, ok := values[orderField].(string)
	if !ok {
		return Message{}, fmt.Errorf("field %q missing", orderField)
	}
	var errs []error
	head, replica, ok := strings.Cut(v, "\n")
	if !ok {
		errs = append(errs, errors.New("no newline before the replica"))
	}
	orderID, rest, _ := strings.Cut(head, " ")
	qty, user, _ := strings.Cut(rest, " ")
	m := Message{OrderID: orderID, SKU: sku, User: user, Replica: replica}
	if b, err := hex.DecodeString(orderID); err != nil || len(b) != 16 {
		errs = append(errs, fmt.Errorf("id %q is not 32 hex digits", orderID))
	}
	var err error
	if m.Qty, err = strconv.ParseInt(qty, 10, 64); err != nil || m.Qty < 1 || m.Qty > maxQty {
		errs = append(errs, fmt.Errorf("qty %q is not a whole number from 1 to %d", qty, maxQty))
	}
	errs = append(errs, orders.ValidateUser(user))
	if len(replica) > maxReplica {
		errs = append(errs, fmt.Errorf("replica longer than %d bytes", maxReplica))
	}
	if r, ok := values[roundField]; ok {
		s, _ := r.(string)
		if m.Round, err = strconv.ParseInt(s, 10, 64); err != nil || m.Round < 0 {
			errs = append(errs, fmt.Errorf("round %q is not a whole number from 0", s))
		}
	}
	if m.Admitted, ok = entryTime(id); !ok {
		errs = append(errs, fmt.Errorf("entry id %q has no milliseconds", id))
	}
	if err := errors.Join(errs...); err != nil {
		return Message{}, err
	}
	return m, nil
}

// order is the row m makes on stage; the buyer is in the unique index, the
// backstop behind the admission script's buyer set.
func (m Message) order(stage string) orders.Order {
	return orders.Order{ID: m.OrderID, Stage: stage, SKU: m.SKU, User: m.User, Qty: m.Qty,
		Replica: m.Replica, Created: m.Admitted, Status: orders.StatusLive, OnePerUser: true, Round: m.Round}
}
