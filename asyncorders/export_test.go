package asyncorders

// SetBetweenCancelAndReturn runs f after each pass's cancels, before their
// units go back; an error from f ends the pass there.
func (s *Sweeper) SetBetweenCancelAndReturn(f func() error) { s.betweenCancelAndReturn = f }

// SetBetweenAccountReads runs f in Account between its Redis read and its
// order database read.
func (q *Queue) SetBetweenAccountReads(f func()) { q.betweenAccountReads = f }
