package httpapi

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/lockstep/lockstep/inventory"
	"github.com/lockstep/lockstep/orders"
)

// CodeUnsupportedMediaType answers a deduct whose body is not JSON.
const CodeUnsupportedMediaType = "unsupported_media_type"

// queryParams is the table of the query parameters each route reads, by
// gin's route pattern; a route that reads none is listed with none, and a
// query naming anything else is refused.
func queryParams() map[string][]string {
	return map[string][]string{
		"/api/stages":               nil,
		"/api/stages/:stage/deduct": {"sku", "qty", "user"},
		"/api/stages/:stage/audit":  {"sku"},
		"/api/stages/:stage/reset":  nil,
		"/api/stages/:stage/faults": nil,
		"/api/stages/:stage/trace":  {"wait"},
		"/api/orders":               {"stage", "sku", "after", "limit"},
		"/api/orders/:id/pay":       {"user"},
	}
}

// parseQuery reads a raw query strictly, where Go's url.ParseQuery drops
// what it cannot parse and keeps every repeat: each "&"-separated pair
// must be name=value, both percent-decoding, with no ";" (which Go once
// took as a separator), the name one of allowed and given once.
func parseQuery(rawQuery string, allowed []string) (map[string]string, error) {
	values := make(map[string]string)
	if rawQuery == "" {
		return values, nil
	}
	for _, pair := range strings.Split(rawQuery, "&") {
		rawName, rawValue, hasValue := strings.Cut(pair, "=")
		if !hasValue || strings.Contains(pair, ";") {
			return nil, fmt.Errorf("query pair %q: want name=value, separated by &", pair)
		}
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return nil, fmt.Errorf("query pair %q: %w", pair, err)
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return nil, fmt.Errorf("query pair %q: %w", pair, err)
		}
		if _, repeated := values[name]; repeated {
			return nil, fmt.Errorf("query parameter %q given twice", name)
		}
		if !slices.Contains(allowed, name) {
			return nil, fmt.Errorf("unknown query parameter %q (this route reads %s)", name, describeParams(allowed))
		}
		values[name] = value
	}
	return values, nil
}

func describeParams(allowed []string) string {
	if len(allowed) == 0 {
		return "none"
	}
	return strings.Join(allowed, ", ")
}

// query parses the request's query by its route's entry of queryParams,
// answering 400 itself when it is refused.
func (s *Server) query(c *gin.Context) (map[string]string, bool) {
	values, err := parseQuery(c.Request.URL.RawQuery, s.queryParams[c.FullPath()])
	if err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, err.Error())
		return nil, false
	}
	return values, true
}

// saleJSON is the JSON body a deduct may carry instead of, or besides,
// its query.
type saleJSON struct {
	SKU  *string `json:"sku"`
	Qty  *int64  `json:"qty"`
	User *string `json:"user"`
}

// saleArgs reads a deduct's sku (default sku-1), qty (default 1) and user
// (the buyer; default none) from its query and its optional JSON body; a
// parameter given in both must say the same. It answers a refusal itself
// (400, 413, 415).
func (s *Server) saleArgs(c *gin.Context) (sku, user string, qty int64, ok bool) {
	query, ok := s.query(c)
	if !ok {
		return "", "", 0, false
	}
	body, ok := s.saleBody(c)
	if !ok {
		return "", "", 0, false
	}
	sku, qty, err := mergeSaleArgs(query, body)
	if err == nil {
		user, err = mergeUser(query, body)
	}
	if err != nil {
		s.failWith(c, err)
		return "", "", 0, false
	}
	return sku, user, qty, true
}

// mergeUser is the sale's buyer: "" when neither the query nor the body
// names one; given, a valid buyer id (orders.ValidateUser).
func mergeUser(query map[string]string, body saleJSON) (string, error) {
	user, inQuery := query["user"]
	switch {
	case body.User != nil && inQuery && *body.User != user:
		return "", fmt.Errorf("%w: user is %q in the query but %q in the body", inventory.ErrInvalid, user, *body.User)
	case body.User != nil:
		user, inQuery = *body.User, true
	}
	if !inQuery {
		return "", nil
	}
	if err := orders.ValidateUser(user); err != nil {
		return "", fmt.Errorf("%w: %w", inventory.ErrInvalid, err)
	}
	return user, nil
}

// saleBody reads a deduct's optional JSON body: an empty one is no body.
func (s *Server) saleBody(c *gin.Context) (saleJSON, bool) {
	var body saleJSON
	raw, ok := s.readBody(c)
	if !ok || len(raw) == 0 {
		return body, ok
	}
	if kind, _, err := mime.ParseMediaType(c.GetHeader("Content-Type")); err != nil || kind != "application/json" {
		s.fail(c, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType,
			`a sale's body must be JSON, {"sku":"...","qty":N}, sent with Content-Type: application/json`)
		return body, false
	}
	if err := decodeObject(raw, &body); err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, err.Error())
		return body, false
	}
	return body, true
}

func mergeSaleArgs(query map[string]string, body saleJSON) (string, int64, error) {
	sku, inQuery := query["sku"]
	switch {
	case body.SKU != nil && inQuery && *body.SKU != sku:
		return "", 0, fmt.Errorf("%w: sku is %q in the query but %q in the body", inventory.ErrInvalid, sku, *body.SKU)
	case body.SKU != nil:
		sku = *body.SKU
	case !inQuery:
		sku = inventory.DefaultSKU
	}
	if err := inventory.ValidateSKU(sku); err != nil {
		return "", 0, err
	}
	qty := int64(1)
	if q, inQuery := query["qty"]; inQuery {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			return "", 0, fmt.Errorf("%w: qty %q is not an integer", inventory.ErrInvalid, q)
		}
		if body.Qty != nil && *body.Qty != n {
			return "", 0, fmt.Errorf("%w: qty is %d in the query but %d in the body", inventory.ErrInvalid, n, *body.Qty)
		}
		qty = n
	}
	if body.Qty != nil {
		qty = *body.Qty
	}
	if err := inventory.ValidateQty(qty); err != nil {
		return "", 0, err
	}
	return sku, qty, nil
}
