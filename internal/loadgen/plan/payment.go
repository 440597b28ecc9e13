package plan

import "fmt"

// PaymentStep races payments against the order workers' payment sweeper
// (issue 28's payment-timeout): a Share of the buyers pay while the sweeper
// cancels what stays unpaid past its deadline; then the units the sweeper
// gave back are sold again. After the load and drain, each payer pays at a
// random moment within PayWithin of the step's start. With DuringLoad, each
// payer pays while the load still runs: it reads the order id from its
// sale's answer and pays after a delay drawn within 1.5 × PayWithin of that
// answer, so a third of them come late and race the sweeper; a 404 (the
// workers have not written the order yet) is retried, bounded. The workshop
// runs its workers with -pay-within PayWithin and a sweeper.
type PaymentStep struct {
	PayWithin  Duration `yaml:"pay_within" json:"pay_within"`
	Share      float64  `yaml:"share" json:"share"`
	DuringLoad bool     `yaml:"during_load" json:"during_load,omitempty"`
}

func (p *PaymentStep) validate() error {
	if p.PayWithin <= 0 || p.Share < 0 || p.Share > 1 {
		return fmt.Errorf("payment: pay_within must be positive and share within [0, 1]")
	}
	return nil
}
