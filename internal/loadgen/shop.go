package loadgen

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
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// ErrNotReady is returned by waitReady when a shop did not become ready in time.
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

// shopClient speaks the shop's HTTP contract (SPEC: HTTP contract of cmd/shop).
type shopClient struct {
	http       *http.Client
	adminToken string
}

func newShopClient(adminToken string) *shopClient {
	return &shopClient{http: &http.Client{Timeout: 10 * time.Second}, adminToken: adminToken}
}

// apiError is a non-2xx answer of the shop.
type apiError struct {
	Status int
	Code   string `json:"error"`
	Text   string `json:"message"`
}

func (e *apiError) Error() string {
	return fmt.Sprintf("shop answered %d %s: %s", e.Status, e.Code, e.Text)
}

func (c *shopClient) do(ctx context.Context, method, rawURL string, body any, admin bool, out any) error {
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
		apiErr := &apiError{Status: resp.StatusCode}
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

func stageURL(base, stage, action string) string {
	return strings.TrimRight(base, "/") + "/api/stages/" + url.PathEscape(stage) + "/" + action
}

func deductURL(base, stage, sku string) string {
	return stageURL(base, stage, "deduct") + "?" + url.Values{"sku": {sku}, "qty": {"1"}}.Encode()
}

func (c *shopClient) stages(ctx context.Context, base string) ([]StageInfo, error) {
	var out struct {
		Stages []StageInfo `json:"stages"`
	}
	if err := c.do(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/api/stages", nil, false, &out); err != nil {
		return nil, err
	}
	return out.Stages, nil
}

func (c *shopClient) reset(ctx context.Context, base, stage, sku string, stock plan.Stock, segments int) error {
	body := map[string]any{"sku": sku, "stock": stock}
	if segments > 0 {
		body["segments"] = segments
	}
	return c.do(ctx, http.MethodPost, stageURL(base, stage, "reset"), body, true, nil)
}

func (c *shopClient) setFaults(ctx context.Context, base, stage string, f plan.Faults) error {
	return c.do(ctx, http.MethodPut, stageURL(base, stage, "faults"), f, true, nil)
}

func (c *shopClient) audit(ctx context.Context, base, stage, sku string) (report.Audit, error) {
	var a report.Audit
	err := c.do(ctx, http.MethodGet, stageURL(base, stage, "audit")+"?"+url.Values{"sku": {sku}}.Encode(), nil, false, &a)
	return a, err
}

// deduct sends one sale attempt and returns the status code, or the
// transport error (a crashed replica gives one, or a 502 from the proxy).
// deduct sends one sale attempt, for user when it is not "".
func (c *shopClient) deduct(ctx context.Context, base, stage, sku, user string) (int, error) {
	target := deductURL(base, stage, sku)
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

// saleAnswer is one deduct's answer, decoded.
type saleAnswer struct {
	status        int
	code, message string
	err           error
	sent, end     time.Time
	replica       string
}

func (a saleAnswer) String() string {
	var urlErr *url.Error
	switch {
	case errors.As(a.err, &urlErr):
		return "no answer: " + urlErr.Err.Error() // the URL is the victim's, known
	case a.err != nil:
		return a.err.Error()
	case a.code != "":
		return fmt.Sprintf("%d %s: %s", a.status, a.code, a.message)
	}
	return fmt.Sprintf("%d", a.status)
}

// result is the answer as vegeta would have recorded it.
func (a saleAnswer) result() *vegeta.Result {
	res := &vegeta.Result{Code: uint16(a.status), Timestamp: a.sent, Latency: a.end.Sub(a.sent), Headers: http.Header{}}
	if a.err != nil {
		res.Error = a.err.Error()
	}
	if a.replica != "" {
		res.Headers.Set("X-Replica", a.replica)
	}
	return res
}

// sale sends one deduct and decodes its answer; a transport error (a killed
// replica) is an answer too.
func (c *shopClient) sale(ctx context.Context, base, stage, sku string) saleAnswer {
	a := saleAnswer{sent: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, deductURL(base, stage, sku), nil)
	if err != nil {
		a.err = fmt.Errorf("deduct: %w", err)
		a.end = time.Now()
		return a
	}
	resp, err := c.http.Do(req)
	a.end = time.Now()
	if err != nil {
		a.err = fmt.Errorf("deduct: %w", err)
		return a
	}
	defer resp.Body.Close()
	a.status, a.replica = resp.StatusCode, resp.Header.Get("X-Replica")
	var body struct {
		Code    string `json:"error"`
		Message string `json:"message"`
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(data, &body) == nil {
		a.code, a.message = body.Code, body.Message
	}
	return a
}

// replicaName asks a replica its name (X-Replica).
func (c *shopClient) replicaName(ctx context.Context, base string) (string, error) {
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

// serverHeader returns the Server header the target answers with, which
// names the proxy in front of the shops (nginx says "nginx/1.22.1").
func (c *shopClient) serverHeader(ctx context.Context, base string) string {
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

// waitReady polls GET /readyz until it answers 200.
func (c *shopClient) waitReady(ctx context.Context, base string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		err := c.do(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/readyz", nil, false, nil)
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
