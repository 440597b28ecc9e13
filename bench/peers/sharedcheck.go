package main

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// sharedCheck is an exclusionCheck that sees every process of a
// multi-process run: the counters live in a file every process maps with
// MAP_SHARED, so they share the same physical page, and the atomic
// instructions on it are as atomic across processes as across threads. It
// depends on nothing the locks under test use (not Redis, not its clock), so
// an overlap cannot go unnoticed.
type sharedCheck struct {
	mem []byte
}

// The page's layout: two 8-byte-aligned counters.
const (
	sharedInside   = 0
	sharedOverlaps = 8
	sharedSize     = 4096
)

// createSharedCheck makes the file (zeroed) and maps it.
func createSharedCheck(path string) (*sharedCheck, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("shared check file: %w", err)
	}
	defer f.Close()
	if err := f.Truncate(sharedSize); err != nil {
		return nil, fmt.Errorf("shared check file: %w", err)
	}
	return mapSharedCheck(f)
}

// openSharedCheck maps a file createSharedCheck made.
func openSharedCheck(path string) (*sharedCheck, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("shared check file: %w", err)
	}
	defer f.Close()
	return mapSharedCheck(f)
}

func mapSharedCheck(f *os.File) (*sharedCheck, error) {
	mem, err := syscall.Mmap(int(f.Fd()), 0, sharedSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map shared check file: %w", err)
	}
	return &sharedCheck{mem: mem}, nil
}

func (c *sharedCheck) counter(offset int) *int64 {
	return (*int64)(unsafe.Pointer(&c.mem[offset]))
}

func (c *sharedCheck) enter() {
	if atomic.AddInt64(c.counter(sharedInside), 1) != 1 {
		atomic.AddInt64(c.counter(sharedOverlaps), 1)
	}
}

func (c *sharedCheck) leave() { atomic.AddInt64(c.counter(sharedInside), -1) }

// overlaps is the number of entries, in any process, that found another
// critical section under way.
func (c *sharedCheck) overlaps() int64 { return atomic.LoadInt64(c.counter(sharedOverlaps)) }

func (c *sharedCheck) Close() error { return syscall.Munmap(c.mem) }
