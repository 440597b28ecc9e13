// Package sharedcheck counts critical sections across processes: the
// counters live in a file every process maps with MAP_SHARED, so they share
// one physical page, and atomic instructions on it are as atomic across
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

// pageSize is the mapped size: 256 slots of two 8-byte counters.
const pageSize = 4096

// Slots is how many independent critical sections (keys) one file counts.
const Slots = pageSize / 16

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
	if err := f.Truncate(pageSize); err != nil {
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
	mem, err := syscall.Mmap(int(f.Fd()), 0, pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map shared check file: %w", err)
	}
	return &Check{mem: mem}, nil
}

// counter is the 8-byte counter at offset; slot s holds "inside" at 16s
// and "overlaps" at 16s+8.
func (c *Check) counter(offset int) *int64 {
	return (*int64)(unsafe.Pointer(&c.mem[offset]))
}

// Enter counts a critical section of slot entered, and an overlap when
// another one of that slot was under way, in any process.
func (c *Check) Enter(slot int) {
	if atomic.AddInt64(c.counter(16*slot), 1) != 1 {
		atomic.AddInt64(c.counter(16*slot+8), 1)
	}
}

// Leave counts the critical section of slot left.
func (c *Check) Leave(slot int) { atomic.AddInt64(c.counter(16*slot), -1) }

// Overlaps is the number of entries, over every slot and process, that
// found another critical section of their slot under way.
func (c *Check) Overlaps() int64 {
	var n int64
	for s := range Slots {
		n += atomic.LoadInt64(c.counter(16*s + 8))
	}
	return n
}

// Close unmaps the page.
func (c *Check) Close() error { return syscall.Munmap(c.mem) }
