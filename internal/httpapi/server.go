// Package httpapi is the HTTP face of one shop replica, as SPEC.md's "HTTP
// contract of cmd/shop" describes it: the deduct, audit, reset and faults
// routes of every stage, idempotent deducts, health and readiness, and the
// Prometheus endpoint. Every response is JSON (errors are
// {"error":"<code>","message":"..."}) and carries X-Replica.
package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/lockstep/lockstep/internal/frontdoor"
	"github.com/lockstep/lockstep/internal/metrics"
	"github.com/lockstep/lockstep/internal/redistrace"
	"github.com/lockstep/lockstep/inventory"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
)

// Error codes of the JSON error body.
const (
	CodeSoldOut = "sold_out"
	// CodeAlreadyBought: the buyer has an order on a one-per-user stage.
	CodeAlreadyBought    = "already_bought"
	CodeLockBusy         = "lock_busy"
	CodeBadRequest       = "bad_request"
	CodePayloadTooLarge  = "payload_too_large"
	CodeUnknownStage     = "unknown_stage"
	CodeStageUnavailable = "stage_unavailable"
	CodeRedisUnavailable = "redis_unavailable"
	// The lock-server stages name the server that did not answer.
	CodeMySQLUnavailable     = "mysql_unavailable"
	CodeEtcdUnavailable      = "etcd_unavailable"
	CodeZooKeeperUnavailable = "zookeeper_unavailable"
	// CodeOrdersUnavailable: an order stage's order database (MySQL or
	// SQLite, named in the message) did not answer.
	CodeOrdersUnavailable = "orders_unavailable"
	CodeUnauthorized      = "unauthorized"
	CodeForbidden         = "forbidden"
	CodeNotFound          = "not_found"
	CodeMethodNotAllowed  = "method_not_allowed"
	CodeNotReady          = "not_ready"
	CodeInternal          = "internal"
	// CodeOutcomeUnknown: an Idempotency-Key whose first request may have
	// sold, but never recorded its answer; the key never sells again.
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeMayHaveSold: this request's stock write (or its order) was sent
	// and its reply lost: it may have sold. Every other error code of a
	// deduct but CodeOutcomeUnknown and CodeKeyInProgress means nothing
	// was sold (docs/exactly-once.md).
	CodeMayHaveSold = "may_have_sold"
	// CodeKeyInProgress: the Idempotency-Key's first request is still
	// running (it may be selling); retry with the same key.
	CodeKeyInProgress = "key_in_progress"
	// CodeRateLimited: the shop's limiter refused the request before the
	// stage or the Idempotency-Key were touched; nothing was sold and the
	// key is still free. Retry-After says when to try again.
	CodeRateLimited = "rate_limited"
)

// Limits of a request: the admin bodies are a few fields, the headers a
// few short lines (nginx's own default header buffers are 8 KiB).
const (
	MaxBodyBytes   = 64 << 10
	MaxHeaderBytes = 16 << 10
)

// Config configures a Server.
type Config struct {
	Inventory *inventory.Inventory
	// Redis keeps the idempotency keys (the inventory's stock Redis).
	Redis   redis.UniversalClient
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// Replica names this shop in X-Replica and in sale bodies.
	Replica string
	// AdminToken guards the admin routes; empty means loopback clients only.
	AdminToken string
	// IdempotencyTTL is how long an Idempotency-Key's answer is kept
	// (default 24h).
	IdempotencyTTL time.Duration
	// RequestTimeout bounds one deduct, lock wait included (default 10s).
	RequestTimeout time.Duration
	// Tracer, optional, records the Redis commands of a sale on request
	// (POST /api/stages/{stage}/trace); it must be attached to the clients.
	Tracer *redistrace.Tracer
	// Limiter, optional, is asked before every deduct of every stage,
	// keyed by the buyer (the sale's user, else the client's address).
	Limiter frontdoor.Limiter
	// SoldOut, optional, is the sold-out mark: a SKU this replica learned
	// is sold out is answered sold_out from memory, before the stage.
	SoldOut *frontdoor.SoldOutMark
	// FrontDoor, optional, counts the limiter's and the mark's answers.
	FrontDoor *metrics.FrontDoor
}

const defaultRequestTimeout = 10 * time.Second

// minPendingTTL is the shortest lease of an Idempotency-Key's pending
// marker: a quarter of it apart, its owner's renewals survive a loaded
// machine's pauses.
const minPendingTTL = time.Second

// Server is one shop replica's HTTP handler.
type Server struct {
	cfg       Config
	inv       *inventory.Inventory
	metrics   *metrics.Metrics
	log       *slog.Logger
	idem      *idempotency
	deducts   map[string]*metrics.Deducts // by stage, for the stages this shop runs
	tokenHash *[sha256.Size]byte
	draining  atomic.Bool
	handler   http.Handler
	sampler   *redistrace.Sampler[answer] // nil without Config.Tracer
	// queryParams: the query parameters of each route (query.go).
	queryParams map[string][]string
	// replicaValue is X-Replica's value, nil for an empty Replica (no
	// header, as gin's c.Header does): built once, since every answer
	// carries it.
	replicaValue []string
	// markBody is the sold-out mark's answer, encoded once: the mark
	// answers the spike's bulk, after the sell-out.
	markBody []byte
}

// jsonContentType is the Content-Type of a deduct's answer, built once.
// A shared value slice is safe: net/http copies it when it writes the
// header, and its capacity of one makes an Add append to a copy.
var jsonContentType = []string{"application/json; charset=utf-8"}[:1:1]

// New builds the routes.
func New(cfg Config) *Server {
	if cfg.IdempotencyTTL == 0 {
		cfg.IdempotencyTTL = 24 * time.Hour
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = defaultRequestTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	markBody, _ := json.Marshal(errorBody{Error: CodeSoldOut, Message: inventory.ErrSoldOut.Error() + " (the sold-out mark: no Redis round trip)"}) // two strings always encode
	s := &Server{
		cfg: cfg, inv: cfg.Inventory, metrics: cfg.Metrics, log: cfg.Logger, markBody: markBody,
		idem: &idempotency{
			rdb: cfg.Redis, log: cfg.Logger, ttl: cfg.IdempotencyTTL,
			// The marker is a lease its owner renews while it runs: it
			// lapses (or, after the write, reads as outcome unknown) only
			// when its replica stopped.
			pendingTTL: max(cfg.RequestTimeout, minPendingTTL),
			releases:   newReleaser(cfg.Redis, cfg.Logger),
		},
		deducts:     make(map[string]*metrics.Deducts),
		sampler:     newSampler(cfg.Tracer),
		queryParams: queryParams(),
	}
	if cfg.Replica != "" {
		s.replicaValue = []string{cfg.Replica}[:1:1]
	}
	for _, info := range cfg.Inventory.Stages() {
		if info.Available {
			s.deducts[info.ID] = cfg.Metrics.Deducts(info.ID)
		}
	}
	if cfg.AdminToken != "" {
		h := sha256.Sum256([]byte(cfg.AdminToken))
		s.tokenHash = &h
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// A path with a trailing slash is no route of ours: a JSON 404 with
	// X-Replica, not gin's 301/307 with an HTML body.
	r.RedirectTrailingSlash = false
	r.Use(s.replicaHeader, gin.CustomRecoveryWithWriter(io.Discard, s.recovered))
	r.NoRoute(func(c *gin.Context) { s.fail(c, http.StatusNotFound, CodeNotFound, "no such route") })
	r.NoMethod(func(c *gin.Context) {
		s.fail(c, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method not allowed on this route")
	})
	r.GET("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(cfg.Metrics.Registry, promhttp.HandlerOpts{})))
	api := r.Group("/api/stages")
	api.GET("", s.stages)
	api.POST("/:stage/deduct", s.deduct)
	api.GET("/:stage/audit", s.audit)
	api.POST("/:stage/reset", s.admin, s.reset)
	api.PUT("/:stage/faults", s.admin, s.setFaults)
	api.POST("/:stage/trace", s.admin, s.trace)
	r.GET("/api/orders", s.admin, s.orders)
	r.POST("/api/orders/:id/pay", s.pay)
	s.handler = r
	return s
}

// Handler is the shop's http.Handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Drain makes readiness fail, so a load balancer stops sending requests
// while the server shuts down.
func (s *Server) Drain() { s.draining.Store(true) }

// Close stops the background release of keys that sold nothing (those
// still waiting keep their markers).
func (s *Server) Close() { s.idem.releases.close() }

func (s *Server) replicaHeader(c *gin.Context) {
	if s.replicaValue != nil {
		c.Writer.Header()["X-Replica"] = s.replicaValue
	}
	c.Next()
}

// writeAnswer writes a deduct's answer as gin's c.Data would, without
// allocating the Content-Type's value slice per answer.
func writeAnswer(c *gin.Context, a answer) {
	c.Writer.Header()["Content-Type"] = jsonContentType
	if a.retryAfter > 0 {
		c.Header("Retry-After", strconv.FormatInt(int64(math.Ceil(a.retryAfter.Seconds())), 10))
	}
	c.Status(a.Status)
	_, _ = c.Writer.Write(a.Body)
}

func (s *Server) recovered(c *gin.Context, v any) {
	s.log.Error("panic in handler", "path", c.Request.URL.Path, "panic", v)
	s.fail(c, http.StatusInternalServerError, CodeInternal, "internal error")
}

// fail answers a JSON error and stops the handler chain.
func (s *Server) fail(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, errorBody{Error: code, Message: message})
}

type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// errorStatus maps an inventory error to its status and code.
func errorStatus(err error) (int, string) {
	switch {
	case errors.Is(err, inventory.ErrUnknownStage):
		return http.StatusNotFound, CodeUnknownStage
	case errors.Is(err, inventory.ErrStageUnavailable):
		return http.StatusServiceUnavailable, CodeStageUnavailable
	case errors.Is(err, inventory.ErrInvalid):
		return http.StatusBadRequest, CodeBadRequest
	case errors.Is(err, inventory.ErrSoldOut):
		return http.StatusConflict, CodeSoldOut
	case errors.Is(err, inventory.ErrAlreadyBought):
		return http.StatusConflict, CodeAlreadyBought
	case errors.Is(err, inventory.ErrLockBusy):
		return http.StatusLocked, CodeLockBusy
	case errors.Is(err, inventory.ErrOutcomeUnknown): // whichever server lost the reply
		return http.StatusServiceUnavailable, CodeMayHaveSold
	case errors.Is(err, inventory.ErrMySQLUnavailable):
		return http.StatusServiceUnavailable, CodeMySQLUnavailable
	case errors.Is(err, inventory.ErrEtcdUnavailable):
		return http.StatusServiceUnavailable, CodeEtcdUnavailable
	case errors.Is(err, inventory.ErrZooKeeperUnavailable):
		return http.StatusServiceUnavailable, CodeZooKeeperUnavailable
	case errors.Is(err, inventory.ErrOrdersUnavailable):
		return http.StatusServiceUnavailable, CodeOrdersUnavailable
	case errors.Is(err, inventory.ErrUnavailable):
		return http.StatusServiceUnavailable, CodeRedisUnavailable
	default:
		return http.StatusInternalServerError, CodeInternal
	}
}

func (s *Server) failWith(c *gin.Context, err error) {
	status, code := errorStatus(err)
	if status >= 500 {
		s.log.Warn("request failed", "path", c.Request.URL.Path, "status", status, "err", err)
	}
	s.fail(c, status, code, err.Error())
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok", "replica": s.cfg.Replica})
}

func (s *Server) readyz(c *gin.Context) {
	if s.draining.Load() {
		s.fail(c, http.StatusServiceUnavailable, CodeNotReady, "shutting down")
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), 500*time.Millisecond)
	defer cancel()
	if err := s.inv.Ping(ctx); err != nil {
		s.fail(c, http.StatusServiceUnavailable, CodeRedisUnavailable, err.Error())
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready", "replica": s.cfg.Replica})
}

func (s *Server) stages(c *gin.Context) {
	if _, ok := s.query(c); !ok {
		return
	}
	c.JSON(http.StatusOK, gin.H{"stages": s.inv.Stages()})
}

// saleBody is the 200 answer of a deduct.
type saleBody struct {
	Stage     string `json:"stage"`
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	Remaining int64  `json:"remaining"`
	Replica   string `json:"replica"`
	// Segment is the segment that sold and SegmentRemaining its stock left
	// (segmented only); remaining is the SKU's, all segments together.
	Segment          *int   `json:"segment,omitempty"`
	SegmentRemaining *int64 `json:"segment_remaining,omitempty"`
	// Segments are those a sale took from when no one segment could serve
	// it alone.
	Segments []int `json:"segments,omitempty"`
	// User and Order are the buyer and the id of the order (order stages).
	User  string `json:"user,omitempty"`
	Order string `json:"order,omitempty"`
}

func (s *Server) deduct(c *gin.Context) {
	stage := c.Param("stage")
	if err := s.inv.Available(stage); err != nil {
		s.failWith(c, err)
		return
	}
	sku, user, qty, ok := s.saleArgs(c)
	if !ok {
		return
	}
	ctx := withLazyTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer ctx.cancel()
	// limit-redis on one Redis is judged by atomic's own script, in the
	// sale's round trip; any other limiter is asked here, first.
	admission, inSale := s.admissionInSale(c, stage, user)
	if !inSale && !s.admitted(ctx, c, stage, user) {
		return
	}
	deducts := s.deducts[stage]
	if s.cfg.SoldOut != nil && s.cfg.SoldOut.Marked(stage, sku) {
		// Before the Idempotency-Key is claimed: nothing sold, the key free.
		s.cfg.FrontDoor.Marked(stage)
		c.Data(http.StatusConflict, "application/json; charset=utf-8", s.markBody)
		c.Abort()
		return
	}
	sell := func(ctx context.Context) answer {
		if inSale {
			ctx = inventory.WithAdmission(ctx, admission)
		}
		return s.traced(ctx, stage, func(ctx context.Context) answer { return s.sell(ctx, deducts, stage, sku, user, qty) })
	}
	key, keyed := c.Request.Header["Idempotency-Key"]
	if !keyed {
		a := sell(ctx)
		writeAnswer(c, a)
		return
	}
	if len(key) != 1 || !validIdempotencyKey(key[0]) {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, "Idempotency-Key must be one header of 1-255 printable ASCII characters")
		return
	}
	// The key names the sale: every request with it sells under one order id.
	keyedSell := func(ctx context.Context) answer { return sell(inventory.WithSaleKey(ctx, key[0])) }
	a, replayed, err := s.idem.do(ctx, stage, key[0], fmt.Sprintf("sku=%s&qty=%d&user=%s", sku, qty, url.QueryEscape(user)), s.inv.ResumesKeyedSales(stage), keyedSell)
	switch {
	case errors.Is(err, errKeyReused):
		s.fail(c, http.StatusBadRequest, CodeBadRequest, err.Error())
		return
	case errors.Is(err, errPending):
		s.fail(c, http.StatusLocked, CodeKeyInProgress, err.Error())
		return
	case errors.Is(err, errOutcomeUnknown):
		s.fail(c, http.StatusConflict, CodeOutcomeUnknown, err.Error())
		return
	case err != nil:
		s.failWith(c, err)
		return
	}
	if replayed {
		deducts.Replay()
		c.Header("Idempotent-Replayed", "true")
	}
	writeAnswer(c, a)
}

// admitted asks the limiter, if any, and answers a refusal itself: 429
// rate_limited with Retry-After, or 503 when the limiter cannot decide.
func (s *Server) admitted(ctx context.Context, c *gin.Context, stage, user string) bool {
	if s.cfg.Limiter == nil {
		return true
	}
	d, err := s.cfg.Limiter.Allow(ctx, buyerOf(c, user))
	if err != nil {
		s.cfg.FrontDoor.Refused(stage, "unavailable")
		s.fail(c, http.StatusServiceUnavailable, CodeRedisUnavailable, err.Error())
		return false
	}
	if !d.Allowed {
		writeAnswer(c, s.rateLimited(stage, d))
		c.Abort()
		return false
	}
	return true
}

// admissionInSale is the request's limits for stage's own script, when
// the limiter and the stage can judge them there.
func (s *Server) admissionInSale(c *gin.Context, stage, user string) (frontdoor.Admission, bool) {
	l, ok := s.cfg.Limiter.(frontdoor.InSale)
	if !ok || !s.inv.JudgesAdmission(stage) {
		return frontdoor.Admission{}, false
	}
	return l.Admission(buyerOf(c, user))
}

// buyerOf is whom the limits count a request against: its user, else the
// client's address.
func buyerOf(c *gin.Context, user string) string {
	if user != "" {
		return user
	}
	return c.ClientIP()
}

// rateLimited counts a limiter's refusal and answers it: 429 rate_limited
// with Retry-After.
func (s *Server) rateLimited(stage string, d frontdoor.Decision) answer {
	s.cfg.FrontDoor.Refused(stage, d.Scope)
	body, _ := json.Marshal(errorBody{Error: CodeRateLimited, Message: "the " + d.Scope + " rate limit refused this request; nothing was sold"})
	return answer{Status: http.StatusTooManyRequests, Body: body, retryAfter: d.RetryAfter, settle: release}
}

// sell runs one sale and renders its answer.
func (s *Server) sell(ctx context.Context, deducts *metrics.Deducts, stage, sku, user string, qty int64) answer {
	start := time.Now()
	var epoch uint64
	if s.cfg.SoldOut != nil {
		epoch = s.cfg.SoldOut.Begin()
	}
	sale, err := s.inv.DeductFor(ctx, stage, sku, user, qty)
	// The stock is empty when one unit could not be sold (more could fail
	// with stock left). A sale's Remaining is not trusted: segmented's may
	// be one segment's, a lower bound of the SKU's.
	if s.cfg.SoldOut != nil && qty == 1 && errors.Is(err, inventory.ErrSoldOut) {
		s.cfg.SoldOut.Learn(stage, sku, epoch)
	}
	if err == nil {
		deducts.Request(metrics.ResultSold, time.Since(start))
		body := saleBody{
			Stage: stage, SKU: sku, Qty: qty, Remaining: sale.Remaining, Replica: s.cfg.Replica,
			Segment: sale.Segment, SegmentRemaining: sale.SegmentRemaining, Segments: sale.Segments, User: user, Order: sale.Order,
		}
		return answer{Status: http.StatusOK, Body: body.appendJSON(make([]byte, 0, 128)), settle: keep}
	}
	var refusal *frontdoor.Refusal
	if errors.As(err, &refusal) {
		return s.rateLimited(stage, refusal.Decision)
	}
	settle := release // every other error sold nothing
	if errors.Is(err, inventory.ErrOutcomeUnknown) {
		settle = unknown
	}
	status, code := errorStatus(err)
	result := metrics.ResultError
	switch status {
	case http.StatusConflict:
		result = metrics.ResultSoldOut
	case http.StatusLocked:
		result = metrics.ResultBusy
	default:
		s.log.Warn("deduct failed", "stage", stage, "sku", sku, "status", status, "err", err)
	}
	deducts.Request(result, time.Since(start))
	encoded, err := json.Marshal(errorBody{Error: code, Message: err.Error()})
	if err != nil {
		return answer{Status: http.StatusInternalServerError, Body: []byte(`{"error":"internal","message":"encode answer"}`), settle: settle}
	}
	return answer{Status: status, Body: encoded, settle: settle}
}

// appendJSON appends the bytes json.Marshal writes for b, without its
// reflection: every sale renders one.
func (b saleBody) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"stage":`...)
	dst = appendJSONString(dst, b.Stage)
	dst = append(dst, `,"sku":`...)
	dst = appendJSONString(dst, b.SKU)
	dst = append(dst, `,"qty":`...)
	dst = strconv.AppendInt(dst, b.Qty, 10)
	dst = append(dst, `,"remaining":`...)
	dst = strconv.AppendInt(dst, b.Remaining, 10)
	dst = append(dst, `,"replica":`...)
	dst = appendJSONString(dst, b.Replica)
	if b.Segment != nil {
		dst = append(dst, `,"segment":`...)
		dst = strconv.AppendInt(dst, int64(*b.Segment), 10)
	}
	if b.SegmentRemaining != nil {
		dst = append(dst, `,"segment_remaining":`...)
		dst = strconv.AppendInt(dst, *b.SegmentRemaining, 10)
	}
	if len(b.Segments) > 0 {
		dst = append(dst, `,"segments":[`...)
		for i, seg := range b.Segments {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, int64(seg), 10)
		}
		dst = append(dst, ']')
	}
	if b.User != "" {
		dst = append(dst, `,"user":`...)
		dst = appendJSONString(dst, b.User)
	}
	if b.Order != "" {
		dst = append(dst, `,"order":`...)
		dst = appendJSONString(dst, b.Order)
	}
	return append(dst, '}')
}

// appendJSONString appends s as encoding/json writes it: as is between
// quotes when no byte needs escaping (printable ASCII other than the quote,
// the backslash and the HTML characters it escapes), else json.Marshal's
// own encoding.
func appendJSONString(dst []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(dst, quoted...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// auditBody is the answer of GET audit.
type auditBody struct {
	Stage string `json:"stage"`
	SKU   string `json:"sku"`
	inventory.Audit
}

func (s *Server) audit(c *gin.Context) {
	stage := c.Param("stage")
	query, ok := s.query(c)
	if !ok {
		return
	}
	sku, given := query["sku"]
	if !given {
		sku = inventory.DefaultSKU
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	a, err := s.inv.Audit(ctx, stage, sku)
	if err != nil {
		s.failWith(c, err)
		return
	}
	c.JSON(http.StatusOK, auditBody{Stage: stage, SKU: sku, Audit: a})
}

// resetBody is the body of POST reset.
type resetBody struct {
	SKU      *string `json:"sku"`
	Stock    *int64  `json:"stock"`
	Segments int     `json:"segments"`
}

func (s *Server) reset(c *gin.Context) {
	stage := c.Param("stage")
	if err := s.inv.Available(stage); err != nil {
		s.failWith(c, err)
		return
	}
	var body resetBody
	if _, ok := s.query(c); !ok || !s.decodeBody(c, &body) {
		return
	}
	if body.Stock == nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, `"stock" is required`)
		return
	}
	sku := inventory.DefaultSKU
	if body.SKU != nil {
		sku = *body.SKU
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.inv.Reset(ctx, stage, sku, *body.Stock, body.Segments); err != nil {
		s.failWith(c, err)
		return
	}
	s.log.Info("reset", "stage", stage, "sku", sku, "stock", *body.Stock, "segments", body.Segments)
	a, err := s.inv.Audit(ctx, stage, sku)
	if err != nil {
		s.failWith(c, err)
		return
	}
	c.JSON(http.StatusOK, auditBody{Stage: stage, SKU: sku, Audit: a})
}

func (s *Server) setFaults(c *gin.Context) {
	stage := c.Param("stage")
	if err := s.inv.Available(stage); err != nil {
		s.failWith(c, err)
		return
	}
	var f inventory.Faults
	if _, ok := s.query(c); !ok || !s.decodeBody(c, &f) {
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), s.cfg.RequestTimeout)
	defer cancel()
	if err := s.inv.SetFaults(ctx, stage, f); err != nil {
		s.failWith(c, err)
		return
	}
	s.log.Info("faults set", "stage", stage, "faults", f)
	c.JSON(http.StatusOK, gin.H{"stage": stage, "faults": f})
}

// decodeBody reads the body as one JSON object into v, refusing unknown
// fields, other JSON values (null would silently mean "all zero") and
// trailing data with 400 bad_request, and bodies over MaxBodyBytes with 413
// payload_too_large. It answers the failure itself and reports whether v
// was filled.
func (s *Server) decodeBody(c *gin.Context, v any) bool {
	raw, ok := s.readBody(c)
	if !ok {
		return false
	}
	if err := decodeObject(raw, v); err != nil {
		s.fail(c, http.StatusBadRequest, CodeBadRequest, err.Error())
		return false
	}
	return true
}

// readBody reads the whole body, refusing one over MaxBodyBytes with 413
// payload_too_large; it answers the failure itself.
func (s *Server) readBody(c *gin.Context) ([]byte, bool) {
	if c.Request.Body == http.NoBody {
		// What the server gives a request that declared no body: most
		// deducts. io.ReadAll would still allocate its buffer.
		return nil, true
	}
	raw, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.fail(c, http.StatusRequestEntityTooLarge, CodePayloadTooLarge, fmt.Sprintf("the body must be at most %d bytes", MaxBodyBytes))
		return nil, false
	case err != nil:
		s.fail(c, http.StatusBadRequest, CodeBadRequest, "read body: "+err.Error())
		return nil, false
	}
	return raw, true
}

// decodeObject decodes raw, one JSON object, into v. Its errors say
// "malformed JSON body" only when raw is not JSON; a JSON body of the
// wrong shape (unknown field, wrong type) is an "invalid body".
func decodeObject(raw []byte, v any) error {
	if trimmed := bytes.TrimLeft(raw, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("invalid body: want one JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("malformed JSON body: %w", err)
		}
		return fmt.Errorf("invalid body: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("invalid body: data after the object")
	}
	return nil
}

// forwardingHeaders are what a proxy adds to a request it passes on
// (nginx.conf sets X-Forwarded-For on every request).
var forwardingHeaders = []string{"X-Forwarded-For", "X-Real-Ip", "Forwarded"}

// admin lets through a request with the admin token, or, with no token
// configured, a loopback client that is not a proxy: behind nginx every
// request comes from loopback, so a forwarded request must not count as
// local. It compares hashes in constant time, so the comparison leaks
// neither the token nor its length.
func (s *Server) admin(c *gin.Context) {
	if s.tokenHash == nil {
		if !directLoopback(c.Request) {
			s.fail(c, http.StatusForbidden, CodeForbidden, "admin routes accept only direct loopback clients (not through a proxy) when no admin token is configured")
		}
		return
	}
	if !s.tokenMatches(c.GetHeader("Authorization")) {
		c.Header("WWW-Authenticate", `Bearer realm="lockstep admin"`)
		s.fail(c, http.StatusUnauthorized, CodeUnauthorized, "admin routes need Authorization: Bearer <admin token>")
	}
}

func directLoopback(r *http.Request) bool {
	for _, h := range forwardingHeaders {
		if _, forwarded := r.Header[h]; forwarded {
			return false
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}

// tokenMatches reports whether authorization is "Bearer <admin token>".
func (s *Server) tokenMatches(authorization string) bool {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	sum := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(sum[:], s.tokenHash[:]) == 1 && ok
}

// NewHTTPServer is the http.Server of a shop: handler behind header size
// and read/write time limits, so a slow or oversized client cannot hold a
// connection or memory. requestTimeout is the deduct bound of Config
// (0: its default); every request gets it and 5 s more to be answered
// (trace waits at most requestTimeout for that reason).
func NewHTTPServer(handler http.Handler, requestTimeout time.Duration) *http.Server {
	if requestTimeout == 0 {
		requestTimeout = defaultRequestTimeout
	}
	return &http.Server{
		Handler:           handler,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      requestTimeout + 5*time.Second,
		IdleTimeout:       2 * time.Minute,
	}
}
