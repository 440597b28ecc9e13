package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/lockstep/lockstep/internal/redistrace"
)

// CodeNothingTraced answers a trace request no sale came to in time.
const CodeNothingTraced = "nothing_traced"

// defaultTraceWait is a trace request's wait for a sale when it names
// none. The longest wait is the request timeout: NewHTTPServer's write
// timeout leaves every request that long and a margin to answer, and a
// longer wait would end in a closed connection instead of an answer.
const defaultTraceWait = 5 * time.Second

// newSampler samples sales for POST trace; nil without a tracer.
func newSampler(t *redistrace.Tracer) *redistrace.Sampler[answer] {
	if t == nil {
		return nil
	}
	return redistrace.NewSampler(t, func(a answer) bool { return a.Status == http.StatusOK })
}

// traced runs one sale, traced when a trace request waits for one.
func (s *Server) traced(ctx context.Context, stage string, sell func(context.Context) answer) answer {
	if s.sampler == nil {
		return sell(ctx)
	}
	return s.sampler.Run(ctx, stage, sell)
}

// traceBody is the answer of POST trace: the Redis commands of one sale.
type traceBody struct {
	Stage   string `json:"stage"`
	Replica string `json:"replica"`
	// Sold is false when no sale came in time and this is the latest
	// attempt that did not sell (busy, sold out).
	Sold bool `json:"sold"`
	redistrace.Sample[answer]
}

// trace waits (?wait=, default 5s, at most the request timeout) for the next sale of the stage on this
// replica and answers the Redis commands it sent.
func (s *Server) trace(c *gin.Context) {
	stage := c.Param("stage")
	if err := s.inv.Available(stage); err != nil {
		s.failWith(c, err)
		return
	}
	if s.sampler == nil {
		s.fail(c, http.StatusNotFound, CodeNotFound, "this shop traces no sales")
		return
	}
	query, ok := s.query(c)
	if !ok {
		return
	}
	longest := s.cfg.RequestTimeout
	wait := min(defaultTraceWait, longest)
	if w, given := query["wait"]; given {
		d, err := time.ParseDuration(w)
		if err != nil || d <= 0 || d > longest {
			s.fail(c, http.StatusBadRequest, CodeBadRequest, fmt.Sprintf("wait must be a duration above 0 and at most %s (the shop's request timeout)", longest))
			return
		}
		wait = d
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), wait)
	defer cancel()
	sample, found, err := s.sampler.Next(ctx, stage)
	if !found {
		s.fail(c, http.StatusServiceUnavailable, CodeNothingTraced, fmt.Sprintf("no sale of %s on this replica within %s", stage, wait))
		return
	}
	c.JSON(http.StatusOK, traceBody{Stage: stage, Replica: s.cfg.Replica, Sold: err == nil, Sample: sample})
}
