// Package frontdoor holds the guards a flash sale puts before its stock:
// the sold-out mark (内存标记, soldout.go: SoldOutMark, its bounds in its
// doc) and rate limiters (限流), one file each behind Limiter, chosen by
// name:
//
//	limit-none   admits everything; bots win units in proportion to their rate
//	limit-local  golang.org/x/time/rate per buyer and global, per replica:
//	             N replicas behind a balancer admit N× the limit
//	limit-redis  GCRA per buyer and global in Redis (go-redis/redis_rate),
//	             shared by every replica
//	limit-nginx  nginx limit_req keyed by the buyer header, before every
//	             replica; New refuses it with ErrNotInProcess
//
// A refused request must lose nothing: the caller answers 429 rate_limited
// with Retry-After before the stage or the idempotency store is touched, so
// a refused request sells nothing and its Idempotency-Key stays free.
//
// What limit-redis's call does when a request to Redis goes wrong (one
// EVALSHA of allow.lua, redis_rate's GCRA over the buyer's and the global
// key at once, all or nothing):
//
//	case                   effect
//	reply lost             a token of each limit is spent, the request is
//	                       refused with the error (fail closed): stricter,
//	                       never looser
//	run twice (a retry)    two tokens spent for one request: stricter
//	arrives late           GCRA judges at Redis's clock; the limit holds
//
// A request costs one round trip, admitted or refused, and a refusal by
// either limit spends no token of the other. In front of atomic, on one
// Redis, it costs none of its own: limit-redis is an InSale limiter, and
// atomic's script judges the limits before it sells (inventory's
// admit.lua, with internal/gcra's functions), so the sale and its limits
// are one EVALSHA. There the table reads: reply lost, the sale's outcome
// is unknown (it may have sold and spent the tokens; 503 may_have_sold,
// or a kept Idempotency-Key), as atomic's own; run twice, two tokens and
// two units, as atomic's script run twice (the shop's clients never send
// a command again); late, judged and sold at Redis's clock
// (inventory's TestAtomicJudgesItsAdmission and
// TestAtomicAdmissionRunTwiceOrLate, each through a proxy). A refusal
// there comes after the Idempotency-Key is claimed and frees it again,
// and a SKU the sold-out mark knows is answered before any limit, so it
// spends no token. On a Cluster the two keys
// live in different slots (the buyers' keys spread by hash tag), so an
// admitted request costs two calls: the buyer's, then the global one; a
// buyer token spent on a request the global limit then refuses is not
// given back. Sending both at once would be one round trip but would spend
// global tokens on the bots the buyer limit refuses.
package frontdoor
