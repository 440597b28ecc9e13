package orders

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Status of an order row.
const (
	// StatusLive is an order: it counts.
	StatusLive = "live"
	// StatusVoid is an id the shop gave up on (see Store.Void); it never
	// counts, and it keeps a late insert of that id out.
	StatusVoid = "void"
)

// MaxUserLength bounds a buyer id.
const MaxUserLength = 64

// ValidateUser reports a buyer id the shop does not accept: empty, longer
// than MaxUserLength bytes, or holding control characters or invalid UTF-8.
func ValidateUser(user string) error {
	switch {
	case user == "":
		return fmt.Errorf("user must not be empty")
	case len(user) > MaxUserLength:
		return fmt.Errorf("user must be at most %d bytes, got %d", MaxUserLength, len(user))
	case strings.ContainsFunc(user, func(r rune) bool { return unicode.IsControl(r) || r == unicode.ReplacementChar }):
		return fmt.Errorf("user must be printable UTF-8 without control characters")
	}
	return nil
}

// NewID makes an order id, before the first attempt to insert it, so that
// every retry names the same row.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}

// KeyedID is the order id of the sale a client named with an idempotency
// key: the same for every request with that key, so a request sent again
// finds the sale the first one started. generation counts the sales of
// that key that were voided (each proven to have sold nothing, so the key
// may sell once more, under the next generation's id).
func KeyedID(stage, sku, key string, generation int) string {
	h := sha256.New()
	for _, part := range []string{stage, sku, key, strconv.Itoa(generation)} {
		h.Write([]byte(part))
		h.Write([]byte{0}) // no part holds a NUL byte (validated), so the parts cannot run together
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Order is one row of the order table.
type Order struct {
	ID      string    `json:"id"`
	Stage   string    `json:"stage"`
	SKU     string    `json:"sku"`
	User    string    `json:"user"`
	Qty     int64     `json:"qty"`
	Replica string    `json:"replica"`
	Created time.Time `json:"created_at"`
	Status  string    `json:"status"`
	// OnePerUser writes the buyer into the unique index (see doc.go); a
	// stage without that backstop leaves it false.
	OnePerUser bool `json:"-"`
	// Round is the reset round of the stock the sale took its units from
	// (the order stages whose stock is in Redis): Insert lands only while
	// the stage's round in the order database is still this one (doc.go,
	// "Resets"). 0 for the stages that never name a round.
	Round int64 `json:"-"`
}

// Counts are what the report reads of a stage's orders of one SKU; void
// rows never count.
type Counts struct {
	Orders int64 `json:"orders"`
	Units  int64 `json:"units"`
	// Buyers are the distinct named buyers; Anonymous the orders of sales
	// that named none (the optimistic stages ignore the buyer), which
	// belong to no buyer and so are never anyone's duplicate.
	Buyers    int64 `json:"buyers"`
	Anonymous int64 `json:"anonymous"`
	// DuplicateBuyers are buyers with more than one order.
	DuplicateBuyers int64 `json:"duplicate_buyers"`
}

// DuplicateOrders are the orders beyond each named buyer's first.
func (c Counts) DuplicateOrders() int64 { return c.Orders - c.Anonymous - c.Buyers }

// Stock is a stock row of the optimistic MySQL stages.
type Stock struct {
	Initial int64 `json:"initial"`
	Stock   int64 `json:"stock"`
}

// Condition is how Buy's UPDATE guards the stock row.
type Condition int

const (
	// SameStock is the version check: stock = the stock the sale read.
	SameStock Condition = iota
	// EnoughStock is the fix: stock >= qty.
	EnoughStock
)

// Store is the order table (and the optimistic stages' stock rows). Every
// method is safe to call again with the same arguments (doc.go).
type Store interface {
	// Insert writes o as a live order. ErrDuplicateBuyer when o keeps the
	// unique index and its buyer has an order; ErrVoided when o.ID was
	// voided; ErrStaleRound when a reset moved the stage past o.Round.
	Insert(ctx context.Context, o Order) error
	// Void keeps a not yet inserted order id out for good. ErrOrdered when
	// the order was inserted first.
	Void(ctx context.Context, o Order) error
	// HasOrder reports whether user has a live order of sku on stage.
	HasOrder(ctx context.Context, stage, sku, user string) (bool, error)
	Counts(ctx context.Context, stage, sku string) (Counts, error)
	// List pages through the live orders of sku on stage by id, from the
	// first id after after.
	List(ctx context.Context, stage, sku, after string, limit int) ([]Order, error)
	// Reset deletes the orders of sku on stage and sets its stock row. A
	// round above 0 is the stage's new reset round: from then on only the
	// inserts of that round land (doc.go, "Resets"); a reset of an older
	// round than the table's, arriving late, changes nothing.
	Reset(ctx context.Context, stage, sku string, stock, round int64) error
	// Round is the stage's reset round of sku (0 when no reset set one):
	// the floor of a round kept elsewhere that may lose it (asyncorders'
	// Redis round after Redis lost its data).
	Round(ctx context.Context, stage, sku string) (int64, error)
	// Initialise writes the stock row of a SKU that has none.
	Initialise(ctx context.Context, stage, sku string, stock int64) error
	// Stock reads the stock row; ErrNoStock when there is none.
	Stock(ctx context.Context, stage, sku string) (Stock, error)
	// Buy inserts o and takes o.Qty from the stock row in one transaction,
	// when cond holds (read is the stock the sale read, for SameStock):
	// ErrConflict or ErrSoldOut otherwise, and nothing is written.
	Buy(ctx context.Context, o Order, cond Condition, read int64) (remaining int64, err error)
	Close() error
}
