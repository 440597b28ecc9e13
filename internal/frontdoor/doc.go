// Package frontdoor holds the guards a flash sale puts before its stock:
// rate limiters (限流), one file each behind Limiter, chosen by name:
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
// What limit-redis's calls do when a request to Redis goes wrong (one
// redis_rate EVALSHA per key; a buyer's key and the global key are two
// calls, as on a Cluster they live in different slots):
//
//	case                   effect
//	reply lost             a token is spent, the request is refused with the
//	                       error (fail closed): stricter, never looser
//	run twice (a retry)    two tokens spent for one request: stricter
//	arrives late           GCRA judges at Redis's clock; the limit holds
//
// The global call is made only when the buyer's call admitted the request,
// so a bot refused per buyer costs one round trip; an admitted request
// costs two, and a buyer token spent on a request the global limit then
// refuses is not given back (redis_rate has no cancel).
package frontdoor
