GO ?= go

.PHONY: test deps vet bench

# The test command: installs what the suite needs, then runs every test with
# the race detector.
test: deps vet
	$(GO) test -race -count=1 -timeout 12m ./...

deps:
	@bash scripts/install-deps.sh

vet:
	$(GO) vet ./...

# Library benchmarks (see BENCHMARKS.md for the recorded figures).
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 3s ./lock/
