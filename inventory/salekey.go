package inventory

import "context"

// saleKeyKey carries a sale's idempotency key in its context.
type saleKeyKey struct{}

// WithSaleKey returns a context under which a sale is the one a client
// named with key (its Idempotency-Key): the order stages derive the sale's
// order id from it, so that every request with the key names the same
// order and a request sent again finishes the sale the first started
// (orders/doc.go, "One order id per sale").
func WithSaleKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, saleKeyKey{}, key)
}

func saleKey(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(saleKeyKey{}).(string)
	return key, ok
}
