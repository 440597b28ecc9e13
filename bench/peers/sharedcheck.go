package main

import "github.com/lockstep/lockstep/internal/sharedcheck"

// sharedSlot is an exclusionCheck that sees every process of a
// multi-process run: slot 0 of a page every process maps (see
// internal/sharedcheck).
type sharedSlot struct{ *sharedcheck.Check }

func (s sharedSlot) enter() { s.Enter(0) }
func (s sharedSlot) leave() { s.Leave(0) }

// overlaps is the number of entries, in any process, that found another
// critical section under way.
func (s sharedSlot) overlaps() int64 { return s.Overlaps() }

// createSharedCheck makes the page's file (zeroed) and maps it.
func createSharedCheck(path string) (sharedSlot, error) {
	c, err := sharedcheck.Create(path)
	return sharedSlot{c}, err
}

// openSharedCheck maps a file createSharedCheck made.
func openSharedCheck(path string) (sharedSlot, error) {
	c, err := sharedcheck.Open(path)
	return sharedSlot{c}, err
}
