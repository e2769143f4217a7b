# fixpoint: the two quick-start commands are `make demo` and `make test`.
GO ?= go
PKGS ?= ./...

.PHONY: demo test test-short bench soak fuzz vet build services docs

## demo: a demo batch of 3,000 support tickets end to end on the simulator
demo:
	$(GO) run ./cmd/worker demo

## test: every unit and integration test (needs Postgres and NATS, see .ci/run)
test: vet
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## test-short: unit tests only, no services
test-short:
	$(GO) test -short -count=1 $(PKGS)

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change: $$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

build:
	$(GO) build -o bin/ ./cmd/...

## bench: micro-benchmarks of every package, then the end-to-end figures
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	$(GO) run ./cmd/fixpoint-bench

## soak: the integration and fault-injection suite ten times over, under -race
soak:
	$(GO) test -race -count=10 -timeout 90m ./pipeline/

## fuzz: a minute of fuzzing per target, every Fuzz* of the module
## (TestMakeFuzzRunsEveryTarget keeps this list whole)
fuzz:
	for t in FuzzExtract FuzzRepairText FuzzDuplicateKey; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./extract || exit 1; done
	for t in FuzzCompile FuzzValidate; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./validate || exit 1; done
	for t in FuzzEcmaPattern; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./ecma || exit 1; done
	for t in FuzzDocResolve; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./subschema || exit 1; done
	for t in FuzzRules; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./rules || exit 1; done
	for t in FuzzCoerce FuzzDescribeSchema; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./repair || exit 1; done
	for t in FuzzDecode FuzzStrictSchema; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./llm || exit 1; done
	for t in FuzzServeHTTP; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./sim || exit 1; done
	for t in FuzzCanonical; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./store || exit 1; done
	for t in FuzzAlign; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./evidence || exit 1; done
	for t in FuzzSplit; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./chunk || exit 1; done
	for t in FuzzValues; do $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime 60s ./merge || exit 1; done

## services: start the local Postgres and NATS if they are down
services:
	bash .ci/services

## docs: regenerate docs/configuration.md from the commands' --help
docs:
	$(GO) test -count=1 ./cmd/internal/configdoc -run TestConfigurationDoc -update
