package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// defaultOrderPage is the page size of GET /api/orders without limit.
const defaultOrderPage = 100

// ordersBody is the answer of GET /api/orders: a page of orders, and the
// after to ask the next page with ("" on the last page).
type ordersBody struct {
	Stage  string         `json:"stage"`
	SKU    string         `json:"sku"`
	Orders []orders.Order `json:"orders"`
	Next   string         `json:"next,omitempty"`
}

// orders pages through an order stage's orders of a SKU (admin):
// GET /api/orders?stage=S&sku=K&after=<id>&limit=N.
func (s *Server) orders(c *gin.Context) {
	query, ok := s.query(c)
	if !ok {
		return
	}
	stage, sku, after := query["stage"], query["sku"], query["after"]
	if _, given := query["sku"]; !given {
		sku = inventory.DefaultSKU
	}
	limit := defaultOrderPage
	if l, given := query["limit"]; given {
		n, err := strconv.Atoi(l)
		if err != nil {
			s.failWith(c, fmt.Errorf("%w: limit %q is not an integer", inventory.ErrInvalid, l))
			return
		}
		limit = n
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	page, err := s.inv.Orders(ctx, stage, sku, after, limit)
	if err != nil {
		s.failWith(c, err)
		return
	}
	body := ordersBody{Stage: stage, SKU: sku, Orders: page}
	if len(page) == limit {
		body.Next = page[len(page)-1].ID
	}
	c.JSON(http.StatusOK, body)
}
