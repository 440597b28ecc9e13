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
// either limit spends no token of the other. On a Cluster the two keys
// live in different slots (the buyers' keys spread by hash tag), so an
// admitted request costs two calls: the buyer's, then the global one; a
// buyer token spent on a request the global limit then refuses is not
// given back. Sending both at once would be one round trip but would spend
// global tokens on the bots the buyer limit refuses.
package frontdoor
