// Package attack sends a stage's sales with vegeta: the targets (one URL,
// several in turn, or sales naming buyers), the pacing (a fixed rate with
// coordinated omission corrected, or max rate) and the classification of
// each answer. Run puts every result, in the order vegeta's results channel
// gives them, to the observers it is handed, on its own goroutine; its
// Tally (counts, latencies, error samples) is the one observer every
// attack has.
//
// It owns no report column beyond the tally's records (report.Answers,
// report.Latency). It must not import the stores' packages (inventory,
// orders, asyncorders, segments), a Redis client, the loadgen package that
// runs stages, its faults or its expectations: it speaks HTTP to a shop
// and nothing else (imports_test.go).
package attack
