// Package sharedcheck counts critical sections across processes: the
// counters live in a file every process maps with MAP_SHARED, so they share
// the same physical pages, and atomic instructions on them are as atomic across
// processes as across threads. It depends on nothing a lock under test
// uses (no server, no clock), so an overlap cannot go unnoticed.
package sharedcheck

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// Slots is how many independent critical sections (keys) one file counts.
const Slots = 256

// slotSize is a slot's three 8-byte counters: inside, overlaps, peak.
const slotSize = 24

// fileSize is the mapped size.
const fileSize = Slots * slotSize

// Check is one process's mapping of the counters.
type Check struct {
	mem []byte
}

// Create makes the file, zeroed, and maps it.
func Create(path string) (*Check, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shared check file: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(fileSize); err != nil {
		return nil, fmt.Errorf("shared check file: %w", err)
	}
	return mapFile(f)
}

// Open maps a file Create made (in another process).
func Open(path string) (*Check, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shared check file: %w", err)
	}
	defer f.Close()
	return mapFile(f)
}

func mapFile(f *os.File) (*Check, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, fileSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map shared check file: %w", err)
	}
	return &Check{mem: mem}, nil
}

// The counters of a slot, by their offset in it.
const (
	inside   = 0  // critical sections under way
	overlaps = 8  // entries that found another under way
	peak     = 16 // the most under way at once
)

// counter is the 8-byte counter at offset of slot.
func (c *Check) counter(slot, offset int) *int64 {
	return (*int64)(unsafe.Pointer(&c.mem[slot*slotSize+offset]))
}

// Enter counts a critical section of slot entered, and an overlap when
// another one of that slot was under way, in any process.
func (c *Check) Enter(slot int) {
	n := atomic.AddInt64(c.counter(slot, inside), 1)
	if n != 1 {
		atomic.AddInt64(c.counter(slot, overlaps), 1)
	}
	for top := c.counter(slot, peak); ; {
		p := atomic.LoadInt64(top)
		if n <= p || atomic.CompareAndSwapInt64(top, p, n) {
			return
		}
	}
}

// Leave counts the critical section of slot left.
func (c *Check) Leave(slot int) { atomic.AddInt64(c.counter(slot, inside), -1) }

// Overlaps is the number of entries, over every slot and process, that
// found another critical section of their slot under way.
func (c *Check) Overlaps() int64 {
	var n int64
	for s := range Slots {
		n += atomic.LoadInt64(c.counter(s, overlaps))
	}
	return n
}

// Peak is the most critical sections of slot seen under way at once, over
// every process: 1 when they took turns, 2 when two holders overlapped.
func (c *Check) Peak(slot int) int64 { return atomic.LoadInt64(c.counter(slot, peak)) }

// Close unmaps the page.
func (c *Check) Close() error { return syscall.Munmap(c.mem) }
