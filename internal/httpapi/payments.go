package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/lockstep/lockstep/orders"
)

// CodeOrderCancelled: the order was cancelled before its payment arrived.
const CodeOrderCancelled = "order_cancelled"

// pay pays an async stage's order: POST /api/orders/{id}/pay?user=U.
// 200 {"order", "user", "status": "paid"}, also for a replay (paying a paid
// order changes nothing, so a repeated request, with or without an
// Idempotency-Key, answers the same); 409 order_cancelled when the sweeper
// cancelled it first; 404 not_found for an unknown id or another buyer's;
// 400 bad_request for a query that is not exactly one user (queryParams).
func (s *Server) pay(c *gin.Context) {
	query, ok := s.query(c)
	if !ok {
		return
	}
	id, user := c.Param("id"), query["user"]
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	switch err := s.inv.Pay(ctx, id, user); {
	case errors.Is(err, orders.ErrNoOrder):
		s.fail(c, http.StatusNotFound, CodeNotFound, "no order "+id+" of buyer "+user)
	case errors.Is(err, orders.ErrCancelled):
		s.fail(c, http.StatusConflict, CodeOrderCancelled, "order "+id+" was cancelled: its payment came after its deadline")
	case err != nil:
		s.failWith(c, err)
	default:
		c.JSON(http.StatusOK, gin.H{"order": id, "user": user, "status": orders.PaymentPaid})
	}
}
