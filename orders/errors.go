package orders

import "errors"

var (
	// ErrDuplicateBuyer: the buyer already has an order of this SKU on this
	// stage, and the stage keeps the unique index; nothing was written.
	ErrDuplicateBuyer = errors.New("orders: buyer already has an order")
	// ErrVoided: the order's id was voided before its insert arrived; nothing
	// was ordered.
	ErrVoided = errors.New("orders: order id was voided")
	// ErrStaleRound: the stage was reset after the sale took its units (the
	// order's Round is not the table's): nothing was written.
	ErrStaleRound = errors.New("orders: the stage was reset since the sale took its units")
	// ErrOrdered: a Void found the order already inserted; it stands.
	ErrOrdered = errors.New("orders: order already inserted")
	// ErrConflict: Buy's stock row no longer held the stock the sale read
	// (the version check of an optimistic lock); nothing was written.
	ErrConflict = errors.New("orders: stock changed since it was read")
	// ErrSoldOut: Buy's stock row holds fewer units than the sale asked.
	ErrSoldOut = errors.New("orders: sold out")
	// ErrNoStock: the stage has no stock row for the SKU (never reset).
	ErrNoStock = errors.New("orders: no stock row")
	// ErrRefused: the database answered an insert with an error about the
	// row itself (a value it cannot store, a CHECK or a trigger refusing
	// it): nothing was written, and the same row is refused again until
	// someone changes the database. Not an outage: the async workers count
	// these toward giving an entry up (asyncorders).
	ErrRefused = errors.New("orders: the database refused the row")
	// ErrBatchRefused: InsertBatch wrote nothing because one of its rows
	// cannot land as a new live order (refused, a duplicate buyer, a void
	// or another row of its id, a reset round): each row must be written
	// on its own (Insert) to learn which, and to keep the others.
	ErrBatchRefused = errors.New("orders: the batch was refused")
	// ErrUnavailable: the database did not answer; unless the error says
	// otherwise the write's outcome is unknown (see doc.go for each write).
	ErrUnavailable = errors.New("orders: database unavailable")
)
