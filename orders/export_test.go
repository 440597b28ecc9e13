package orders

// SetBetweenPayAndRead runs f between Pay's compare-and-set and its read.
func (p *Payments) SetBetweenPayAndRead(f func()) { p.betweenPayAndRead = f }

// SetBetweenLedgerReads runs f between Ledger's two reads.
func (p *Payments) SetBetweenLedgerReads(f func()) { p.betweenLedgerReads = f }
