package inventory

// StockBackChannel is the Redis pub/sub channel where every return of
// stock is announced, so that the replicas' sold-out marks
// (internal/frontdoor) clear: Reset publishes the stage and SKU, and the
// scripts that give units back (give_back.lua, segment_give_back.lua,
// segment_undo.lua, asyncorders' compensate.lua) publish their stock key,
// naming the channel themselves. A lost message leaves a mark until its
// TTL ends.
const StockBackChannel = "lockstep:stock-back"
