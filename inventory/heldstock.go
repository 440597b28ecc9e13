package inventory

import (
	"context"
	"sync"

	"github.com/lockstep/lockstep/lock"
)

// heldStock remembers, per tag, the stock last read or written under a
// watchdog hold, so a sale the lock passed to locally (same lock.Tenure: no
// other holder in between) reads it without a GET. Only writes under the
// lock may change the stock then; a reset forgets the tag.
type heldStock struct {
	mu    sync.Mutex
	byTag map[string]heldValue
}

type heldValue struct {
	tenure lock.Tenure
	stock  int64
}

func (c *heldStock) get(held context.Context, tag string) (int64, bool) {
	t, ok := lock.TenureOf(held)
	if !ok {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.byTag[tag]
	return v.stock, ok && v.tenure == t
}

func (c *heldStock) put(held context.Context, tag string, stock int64) {
	t, ok := lock.TenureOf(held)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		delete(c.byTag, tag)
		return
	}
	if c.byTag == nil {
		c.byTag = make(map[string]heldValue)
	}
	c.byTag[tag] = heldValue{tenure: t, stock: stock}
}

func (c *heldStock) forget(tag string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byTag, tag)
}
