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
//	run twice (a retry)   give_back.lua, compensate.lua and segment_undo.lua
//	                      give nothing back the second time and announce
//	                      nothing; segment_give_back.lua has no once-only
//	                      mark and is never resent (the shop's clients
//	                      resend nothing). An extra announcement would only
//	                      clear marks again: a round trip more per replica
//	arrives late          the marks clear late: a mark learned after the
//	                      units came back but before the message is voided
//	                      by it (the mark's epoch), one learned before holds
//	                      no longer than the message's delay or its TTL
const StockBackChannel = "lockstep:stock-back"
