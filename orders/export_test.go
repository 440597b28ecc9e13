package orders

// SetBetweenPayAndRead runs f between Pay's compare-and-set and its read.
func (p *Payments) SetBetweenPayAndRead(f func()) { p.betweenPayAndRead = f }
