package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// writeTable is Report.WriteTable.
func writeTable(rep *Report, w io.Writer) error {
	var notes tableNotes
	cols := resultColumns(rep)
	load := terminal(cols, loadTable)
	// The tables after the load's, each with rows for the runs that ran
	// and written when it has a column besides the row's name.
	var after []textTable
	var kinds []resultTable
	for _, t := range []resultTable{shownTable, frontDoorTable} {
		if table := terminal(cols, t); len(table.cols) > 1 {
			after, kinds = append(after, table), append(kinds, t)
		}
	}
	for i := range rep.Stages {
		r := &rep.Stages[i]
		if note := r.notRun(); note != "" { // the reason's number in its first column, the rest blank
			status, _, _ := strings.Cut(note, ":")
			row := make([]string, len(load.cols))
			row[0], row[1] = r.Heading(), fmt.Sprintf("%s [%d]", status, notes.add(r.Heading()+": "+note))
			load.rows = append(load.rows, row)
			continue
		}
		load.rows = append(load.rows, terminalRow(cols, loadTable, r))
		for j := range after {
			after[j].rows = append(after[j].rows, terminalRow(cols, kinds[j], r))
		}
	}
	if err := load.write(w, &notes); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	for _, table := range after {
		if len(table.rows) == 0 {
			continue
		}
		fmt.Fprintln(w)
		if err := table.write(w, &notes); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	if err := notes.write(w); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if err := writeShardTable(rep, w); err != nil {
		return err
	}
	if err := writeFaultTable(rep, w); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "\nRedis: %s; proxy: %s; %d CPUs; wall time %.1fs\n", rep.Redis, rep.Proxy, rep.Machine.CPUs, rep.WallSeconds); err != nil {
		return err
	}
	if err := writeOrderTable(rep, w); err != nil {
		return err
	}
	return writeStreamTable(rep, w)
}

// writeFaultTable prints, when the scenario had fault steps, what each did
// to its stage.
func writeFaultTable(rep *Report, w io.Writer) error {
	rows := faultRows(rep)
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nfailure scenarios:")
	// Oversold and consistent are in the results table above.
	table := textTable{cols: []column{{"stage", name}, {"fault", name}, {"time stuck", text}, {"time to recover", figure},
		{"holders", figure}, {"the holder's sale or loss", text}}}
	for _, f := range rows {
		table.rows = append(table.rows, []string{f.Label, f.Kind, f.StuckText, f.RecoveryText, f.HoldersText, f.VictimText})
	}
	var notes tableNotes
	if err := table.write(w, &notes); err != nil {
		return fmt.Errorf("write fault table: %w", err)
	}
	if err := notes.write(w); err != nil {
		return fmt.Errorf("write fault table: %w", err)
	}
	return nil
}

// faultRow is one line of the failure scenarios' table.
type faultRow struct {
	Label, Kind                                      string
	Oversold                                         int
	Consistent                                       bool
	StuckText, RecoveryText, HoldersText, VictimText string
	Notes                                            []string
}

func faultRows(rep *Report) []faultRow {
	var rows []faultRow
	for i := range rep.Stages {
		r := &rep.Stages[i]
		if r.Fault == nil || r.notRun() != "" {
			continue
		}
		f := r.Fault
		row := faultRow{Label: r.Name(), Kind: f.Kind, Oversold: r.Oversold, Consistent: r.Consistent,
			StuckText: fmtMS(f.StuckMS), RecoveryText: "-", HoldersText: "-", VictimText: "-", Notes: f.Notes}
		if f.Stuck {
			row.StuckText = fmt.Sprintf("forever (no sale in %s)", fmtMS(f.WindowMS))
		}
		if f.RecoveryMS != nil {
			row.RecoveryText = fmtMS(*f.RecoveryMS)
		}
		if r.MaxHolders != nil {
			row.HoldersText = fmt.Sprint(*r.MaxHolders)
		}
		if f.VictimAnswer != "" {
			row.VictimText = f.VictimAnswer
			if f.VictimAnswerMS != nil {
				row.VictimText += fmt.Sprintf(" (%s after the fault)", fmtMS(*f.VictimAnswerMS))
			}
		}
		if f.Outage != nil {
			row.VictimText = fmt.Sprintf("%d of %d sales lost", f.Outage.LostSales, f.Outage.SalesAcked)
		}
		rows = append(rows, row)
	}
	return rows
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// writeShardTable prints, when the stages ran on a cluster, how each
// stage's load phase spread over the masters.
func writeShardTable(rep *Report, w io.Writer) error {
	var rows []*StageRun
	for i := range rep.Stages {
		if len(rep.Stages[i].Shards) > 0 {
			rows = append(rows, &rep.Stages[i])
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nper shard (the cluster's masters in the load phase, busiest first):")
	table := textTable{cols: []column{{"stage", name}, {"master", name}, {"commands", figure}, {"cores", figure},
		{"segments", figure}, {"cmds/sale", figure}, {"busiest", figure}}}
	for _, r := range rows {
		var total int64
		for _, s := range r.Shards {
			total += s.Commands
		}
		perSale := "-"
		if r.Sales > 0 {
			perSale = fmt.Sprintf("%.1f", float64(total)/float64(r.Sales))
		}
		share, _ := r.BusiestShare()
		for i, s := range r.Shards {
			row := []string{"", s.Addr, fmt.Sprint(s.Commands), fmt.Sprintf("%.2f", s.Cores), fmt.Sprint(len(s.Segments)), "", ""}
			if i == 0 { // the stage's own figures, once
				row[0], row[5], row[6] = r.Name(), perSale, fmt.Sprintf("%.0f%%", 100*share)
			}
			table.rows = append(table.rows, row)
		}
	}
	var notes tableNotes // every cell is a figure or a name: nothing is cut
	if err := table.write(w, &notes); err != nil {
		return fmt.Errorf("write shard table: %w", err)
	}
	return nil
}

// writeStreamTable prints, when the scenario ran async stages, each one's
// stream after draining: what is left, the dead letters, and the lag from
// the sale's answer to its order row.
func writeStreamTable(rep *Report, w io.Writer) error {
	table := textTable{cols: []column{{"stage", name}, {"workers in\nthe load", name}, {"drain\ns", figure}, {"orders/s\nin the drain", figure},
		{"length", figure}, {"unde-\nlivered", figure}, {"pending", figure}, {"oldest\npending s", figure}, {"dead\nletters", figure},
		{"lag p50\nms", figure}, {"lag p99\nms", figure}}}
	for i := range rep.Stages {
		r := &rep.Stages[i]
		s := r.Audit.Stream
		if s == nil {
			continue
		}
		workers := "running"
		if r.WorkersHeld {
			workers = "held"
		}
		table.rows = append(table.rows, []string{r.Name(), workers, fmt.Sprintf("%.1f", r.DrainMS/1000), fmt.Sprintf("%.0f", r.DrainOrdersPerSec),
			fmt.Sprint(s.Length), fmt.Sprint(s.Undelivered), fmt.Sprint(s.Pending), fmt.Sprintf("%.1f", s.OldestPending.Seconds()), fmt.Sprint(s.DeadLetters),
			fmt.Sprintf("%.1f", float64(s.LagP50.Microseconds())/1000), fmt.Sprintf("%.1f", float64(s.LagP99.Microseconds())/1000)})
	}
	if len(table.rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "\nOrder streams (after draining):"); err != nil {
		return err
	}
	var notes tableNotes // every cell is a figure or a name: nothing is cut
	if err := table.write(w, &notes); err != nil {
		return fmt.Errorf("write stream table: %w", err)
	}
	return nil
}

// orderRow is an order stage's run as report.html's orders table shows it.
type orderRow struct {
	Label                                             string
	AlreadyBought                                     int
	Orders, Buyers, DuplicateOrders, Units, Conflicts int64
	Undersold                                         int64
	Remaining, Oversold                               int
	CrashUndersold                                    string
}

// orderRows are the runs of order stages, with their crash step's
// undersold units ("-" without one).
func orderRows(rep *Report) []orderRow {
	var rows []orderRow
	for i := range rep.Stages {
		r := &rep.Stages[i]
		o := r.Audit.Orders
		if o == nil {
			continue
		}
		crash := "-"
		if r.Crash != nil && r.Crash.Undersold != nil {
			crash = strconv.FormatInt(*r.Crash.Undersold, 10)
		}
		rows = append(rows, orderRow{
			Label: r.Name(), AlreadyBought: r.AlreadyBought, Orders: o.Orders, Buyers: o.Buyers, DuplicateOrders: o.DuplicateOrders, Units: o.Units,
			Conflicts: o.Conflicts, Undersold: o.Undersold, Remaining: r.Audit.Stock, Oversold: r.Oversold, CrashUndersold: crash,
		})
	}
	return rows
}

// writeOrderTable prints, when the scenario ran order stages, each one's
// orders beside its stock: duplicates, conflicts and undersold units.
func writeOrderTable(rep *Report, w io.Writer) error {
	rows := orderRows(rep)
	if len(rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nOrders (%s):\n", rep.Orders); err != nil {
		return err
	}
	table := textTable{cols: []column{{"stage", name}, {"already\nbought", figure}, {"orders", figure}, {"buyers", figure},
		{"duplicate\norders", figure}, {"units", figure}, {"remaining", figure}, {"conflicts", figure}, {"undersold", figure},
		{"oversold", figure}, {"undersold by\nthe crash step", figure}}}
	for _, r := range rows {
		table.rows = append(table.rows, []string{r.Label, fmt.Sprint(r.AlreadyBought), fmt.Sprint(r.Orders), fmt.Sprint(r.Buyers),
			fmt.Sprint(r.DuplicateOrders), fmt.Sprint(r.Units), fmt.Sprint(r.Remaining), fmt.Sprint(r.Conflicts), fmt.Sprint(r.Undersold),
			fmt.Sprint(r.Oversold), r.CrashUndersold})
	}
	var notes tableNotes // every cell is a figure or a name: nothing is cut
	if err := table.write(w, &notes); err != nil {
		return fmt.Errorf("write order table: %w", err)
	}
	return nil
}
