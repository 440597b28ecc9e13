package asyncorders

import "errors"

var (
	// ErrSoldOut: the SKU has fewer units than the sale asked; nothing written.
	ErrSoldOut = errors.New("asyncorders: sold out")
	// ErrAlreadyBought: the buyer is in the SKU's buyer set; nothing written.
	ErrAlreadyBought = errors.New("asyncorders: buyer has bought already")
	// ErrNoStock: the SKU has no keys yet (never reset nor initialised).
	ErrNoStock = errors.New("asyncorders: no stock yet")
	// ErrUnavailable: Redis did not do what was asked.
	ErrUnavailable = errors.New("asyncorders: redis unavailable")
	// ErrOutcomeUnknown: the request may have run (its reply was lost).
	ErrOutcomeUnknown = errors.New("asyncorders: outcome unknown")
)
