package inventory

// StockBackChannel is the Redis pub/sub channel where every return of
// stock is announced, so that the replicas' sold-out marks
// (internal/frontdoor) clear: Reset publishes the stage and SKU, and the
// scripts that give units back (give_back.lua, segment_give_back.lua,
// segment_undo.lua, asyncorders' compensate.lua) publish their stock key,
// naming the channel themselves. A lost message leaves a mark until its
// TTL ends.
//
// The PUBLISH inside those scripts, when a request goes wrong:
//
//	case                  effect
//	reply lost            the script ran: the units are back and announced
//	run twice (a retry)   the second run gives nothing back (the scripts'
//	                      own once-only marks) and announces nothing; a
//	                      second announcement would only clear marks again
//	arrives late          the marks clear late: a mark learned after the
//	                      units came back but before the message is voided
//	                      by it (the mark's epoch), one learned before holds
//	                      no longer than the message's delay or its TTL
const StockBackChannel = "lockstep:stock-back"
