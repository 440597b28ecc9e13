// Package shopapi is the shop's HTTP API as the load generator speaks it
// (SPEC: HTTP contract of cmd/shop): stages, reset, faults, audit, a sale,
// the orders and payments, and the waits built on them (a replica ready,
// faults applied, an async stage drained). It imports no store but the
// result types the API returns, and no Redis client.
package shopapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lockstep/lockstep/internal/loadgen/plan"
	"github.com/lockstep/lockstep/internal/loadgen/report"
	"github.com/lockstep/lockstep/orders"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// ErrNotReady is returned by WaitReady when a shop did not become ready in time.
var ErrNotReady = errors.New("shop not ready")

// StageInfo is one entry of GET /api/stages: the teaching text of a stage.
type StageInfo struct {
	ID        string `json:"id"`
	Title     string `json:"title"`
	Article   string `json:"article_case"`
	Mechanism string `json:"mechanism"`
	Defect    string `json:"defect"`
	Available bool   `json:"available"`
	Reason    string `json:"unavailable_reason"`
	// Faults are the knobs the answering replica applies right now.
	Faults plan.Faults `json:"faults"`
}

// Client speaks the shop's HTTP contract (SPEC: HTTP contract of cmd/shop).
type Client struct {
	http       *http.Client
	adminToken string
}

func New(adminToken string) *Client {
	return &Client{http: &http.Client{Timeout: 10 * time.Second}, adminToken: adminToken}
}

// APIError is a non-2xx answer of the shop.
type APIError struct {
	Status int
	Code   string `json:"error"`
	Text   string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("shop answered %d %s: %s", e.Status, e.Code, e.Text)
}

// Do sends a request to the shop (with the admin token when admin) and
// decodes a 2xx answer into out; another answer is an *APIError.
func (c *Client) Do(ctx context.Context, method, rawURL string, body any, admin bool, out any) error {
	var reader io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, rawURL, err)
		}
		reader = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, reader)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, rawURL, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if admin && c.adminToken != "" {
		req.Header.Set("Authorization", "Bearer "+c.adminToken)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err // a *url.Error: it names the method and the URL
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, rawURL, err)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := &APIError{Status: resp.StatusCode}
		if json.Unmarshal(data, apiErr) != nil || apiErr.Code == "" {
			apiErr.Text = strings.TrimSpace(string(data))
		}
		return fmt.Errorf("%s %s: %w", method, rawURL, apiErr)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, rawURL, err)
		}
	}
	return nil
}

// StageURL is the URL of a stage's action (deduct, reset, audit...).
func StageURL(base, stage, action string) string {
	return strings.TrimRight(base, "/") + "/api/stages/" + url.PathEscape(stage) + "/" + action
}

// DeductURL is the URL of one sale of sku, one unit.
func DeductURL(base, stage, sku string) string {
	return StageURL(base, stage, "deduct") + "?" + url.Values{"sku": {sku}, "qty": {"1"}}.Encode()
}

// Stages lists the shop's stages (GET /api/stages).
func (c *Client) Stages(ctx context.Context, base string) ([]StageInfo, error) {
	var out struct {
		Stages []StageInfo `json:"stages"`
	}
	if err := c.Do(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/stages", nil, false, &out); err != nil {
		return nil, err
	}
	return out.Stages, nil
}

// Reset sets sku's stock on stage (and its segment count when > 0).
func (c *Client) Reset(ctx context.Context, base, stage, sku string, stock plan.Stock, segments int) error {
	body := map[string]any{"sku": sku, "stock": stock}
	if segments > 0 {
		body["segments"] = segments
	}
	return c.Do(ctx, http.MethodPost, StageURL(base, stage, "reset"), body, true, nil)
}

// SetFaults sets the stage's fault knobs.
func (c *Client) SetFaults(ctx context.Context, base, stage string, f plan.Faults) error {
	return c.Do(ctx, http.MethodPut, StageURL(base, stage, "faults"), f, true, nil)
}

// Audit reads the stage's audit of sku.
func (c *Client) Audit(ctx context.Context, base, stage, sku string) (report.Audit, error) {
	var a report.Audit
	err := c.Do(ctx, http.MethodGet, StageURL(base, stage, "audit")+"?"+url.Values{"sku": {sku}}.Encode(), nil, false, &a)
	return a, err
}

// Deduct sends one sale attempt, for user when it is not "", and returns
// the status code, or the transport error (a crashed replica gives one, or
// a 502 from the proxy).
func (c *Client) Deduct(ctx context.Context, base, stage, sku, user string) (int, error) {
	target := DeductURL(base, stage, sku)
	if user != "" {
		target += "&" + url.Values{"user": {user}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
	if err != nil {
		return 0, fmt.Errorf("deduct: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("deduct: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// Answer is one deduct's answer, decoded.
type Answer struct {
	Status        int
	Code, Message string
	Err           error
	Sent, End     time.Time
	Replica       string
}

func (a Answer) String() string {
	var urlErr *url.Error
	switch {
	case errors.As(a.Err, &urlErr):
		return "no answer: " + urlErr.Err.Error() // the URL is the victim's, known
	case a.Err != nil:
		return a.Err.Error()
	case a.Code != "":
		return fmt.Sprintf("%d %s: %s", a.Status, a.Code, a.Message)
	}
	return fmt.Sprintf("%d", a.Status)
}

// Result is the answer as vegeta would have recorded it.
func (a Answer) Result() *vegeta.Result {
	res := &vegeta.Result{Code: uint16(a.Status), Timestamp: a.Sent, Latency: a.End.Sub(a.Sent), Headers: http.Header{}}
	if a.Err != nil {
		res.Error = a.Err.Error()
	}
	if a.Replica != "" {
		res.Headers.Set("X-Replica", a.Replica)
	}
	return res
}

// Sale sends one deduct and decodes its answer; a transport error (a killed
// replica) is an answer too.
func (c *Client) Sale(ctx context.Context, base, stage, sku string) Answer {
	a := Answer{Sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, DeductURL(base, stage, sku), nil)
	if err != nil {
		a.Err = fmt.Errorf("deduct: %w", err)
		a.End = time.Now()
		return a
	}
	resp, err := c.http.Do(req)
	a.End = time.Now()
	if err != nil {
		a.Err = fmt.Errorf("deduct: %w", err)
		return a
	}
	defer resp.Body.Close()
	a.Status, a.Replica = resp.StatusCode, resp.Header.Get("X-Replica")
	var body struct {
		Code    string `json:"error"`
		Message string `json:"message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &body) == nil {
		a.Code, a.Message = body.Code, body.Message
	}
	return a
}

// ReplicaName asks a replica its name (X-Replica).
func (c *Client) ReplicaName(ctx context.Context, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/healthz", nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if name := resp.Header.Get("X-Replica"); name != "" {
		return name, nil
	}
	return "", fmt.Errorf("%s answers no X-Replica", base)
}

// ServerHeader returns the Server header the target answers with, which
// names the proxy in front of the shops (nginx says "nginx/1.22.1").
func (c *Client) ServerHeader(ctx context.Context, base string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/healthz", nil)
	if err != nil {
		return ""
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("Server")
}

// WaitReady polls GET /readyz until it answers 200.
func (c *Client) WaitReady(ctx context.Context, base string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := c.Do(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/readyz", nil, false, nil)
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s: %w", ErrNotReady, base, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// MaxOrders bounds the orders Orders lists (a page of 1000 each), and so
// the orders one payment step pays.
const MaxOrders = 5000

// Orders lists the orders of stage and sku, page by page, at most MaxOrders.
func (c *Client) Orders(ctx context.Context, base, stage, sku string) ([]orders.Order, error) {
	var all []orders.Order
	after := ""
	for len(all) < MaxOrders {
		var page struct {
			Orders []orders.Order `json:"orders"`
			Next   string         `json:"next"`
		}
		q := url.Values{"stage": {stage}, "sku": {sku}, "after": {after}, "limit": {"1000"}}
		if err := c.Do(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/orders?"+q.Encode(), nil, true, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Orders...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	return all, nil
}

// Pay pays order id as user.
func (c *Client) Pay(ctx context.Context, base, id, user string) error {
	u := strings.TrimRight(base, "/") + "/api/orders/" + url.PathEscape(id) + "/pay?" + url.Values{"user": {user}}.Encode()
	return c.Do(ctx, http.MethodPost, u, nil, false, nil)
}

// Buy sends one sale of sku for user and returns its status.
func (c *Client) Buy(ctx context.Context, base, stage, sku, user string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, DeductURL(base, stage, sku)+"&"+url.Values{"user": {user}}.Encode(), nil)
	if err != nil {
		return 0, fmt.Errorf("buy: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("buy: %w", err)
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
