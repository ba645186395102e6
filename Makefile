# mesh-verify — see README.md. `make demo` runs the main job, `make test` the tests.
GO        ?= go
BIN       := bin
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# -s -w: no symbol table and no DWARF, as make release builds (issue 27:
# bin/mesh-verify 43.7 -> 31 MB, fewer file-backed pages resident, and
# make bench measures what is released); panics still name their
# functions (the pclntab stays) and `mesh-verify version` its version.
LDFLAGS   := -s -w -X main.version=$(VERSION)
# The three modules of go.work: the product, the lab, the end-to-end tests.
PKGS      := ./... ./lab/... ./e2e/...
# Static binaries everywhere: the container image needs one, and the tests'
# builds of the binary then share one build cache with it.
export CGO_ENABLED ?= 0

.PHONY: all build test test-tools fmtcheck unit lab e2e fuzz lint bench demo report-shots lab-up lab-down clean calibrate calibrate-stats calibrate-lab schema image release

all: build

# The product and, beside it, the lab (`mesh-verify lab` runs the
# mesh-verify-lab next to it; the image and releases carry only the product).
# The product is built from its own go.mod alone (GOWORK=off), as `go
# install` and the release build it; the lab is a module of its own (lab/).
build:
	GOWORK=off $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mesh-verify ./cmd/mesh-verify
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/mesh-verify-lab ./lab/cmd/mesh-verify-lab

# The container image without a Docker daemon: an OCI image layout in
# $(OCI) (README.md, "Container image"), from a static build of the CLI,
# by tools/image (its own Go module). `docker build .` makes the same
# image from the Dockerfile where a daemon is at hand.
OCI       ?= build/oci
IMAGE_BIN ?= build/image/mesh-verify
image:
	CGO_ENABLED=0 GOWORK=off $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(IMAGE_BIN) ./cmd/mesh-verify
	cd tools/image && GOWORK=off GOFLAGS=-mod=readonly $(GO) run . -binary $(abspath $(IMAGE_BIN)) \
	  -out $(abspath $(OCI)) -version $(VERSION) -revision "$$(git rev-parse HEAD 2>/dev/null)"

# Release artifacts for a tag (README.md, "Install"; docs/install.md):
# archives, SBOMs, checksums.txt and the krew manifest for linux/darwin x
# amd64/arm64 by tools/release, then the multi-arch image from the same
# linux binaries by tools/image, all in $(DIST). VERSION must be a
# release version: make release VERSION=v1.2.3
DIST      ?= dist
release:
	@case "$(VERSION)" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "make release needs VERSION=vX.Y.Z (got '$(VERSION)')"; exit 2;; esac
	cd tools/release && GOWORK=off GOFLAGS=-mod=readonly $(GO) run . -version $(VERSION) -src $(CURDIR) -out $(abspath $(DIST))
	cd tools/image && GOWORK=off GOFLAGS=-mod=readonly $(GO) run . -out $(abspath $(DIST))/oci -version $(VERSION) \
	  -binary $(abspath $(DIST))/build/linux_amd64/mesh-verify -binary $(abspath $(DIST))/build/linux_arm64/mesh-verify \
	  -revision "$$(git rev-parse HEAD 2>/dev/null)"

# Unit and integration tests (the e2e package drives the built binary
# against real local servers behind nginx), then the tests of the tool
# modules that release and package it (tools/release, tools/image).
# go vet and the tool modules' tests run beside `go test` (scripts/test.sh).
test: fmtcheck
	GO="$(GO)" MAKE="$(MAKE)" PKGS="$(PKGS)" bash scripts/test.sh

test-tools:
	python3 -m doctest bench/bench.py
	cd tools/release && GOWORK=off GOFLAGS=-mod=readonly $(GO) test -count=1 -timeout 20m ./...
	cd tools/image && GOWORK=off GOFLAGS=-mod=readonly $(GO) test -count=1 ./...

# Every fuzz target for a bounded number of inputs (FUZZTIME=500x, or a
# duration such as 5m for a longer hunt); CI leaves it out (its seeds run in make test).
fuzz:
	FUZZTIME=$(or $(FUZZTIME),500x) FUZZPKGS="$(FUZZPKGS)" bash scripts/fuzz.sh

# Test tiers (README.md "Tests"); `make test` runs them all, as CI does.
#   unit  every package but e2e/, -short: no lab cluster starts (labtest
#         skips in -short mode), for the edit-compile-test loop
#   lab   the lab module and the product's tests against lab API servers
#         (e2e/kube, e2e/runner, e2e/worker, e2e/meshconfig), in full
#   e2e   the e2e module whole: the built binary end to end, and those
UNIT_PKGS = $(shell $(GO) list $(PKGS) | grep -v '/e2e')
LAB_PKGS  := ./lab/... ./e2e/kube ./e2e/runner ./e2e/worker ./e2e/meshconfig
LAB_BIN    = $${MESH_VERIFY_LAB_BIN:-$$(bash tools/lab/build.sh | tail -n1)}
unit:
	$(GO) test -count=1 -short $(UNIT_PKGS)

lab:
	MESH_VERIFY_LAB_BIN="$(LAB_BIN)" $(GO) test -count=1 -timeout 28m $(LAB_PKGS)

e2e:
	MESH_VERIFY_LAB_BIN="$(LAB_BIN)" $(GO) test -count=1 -timeout 28m -v ./e2e/...

# The full calibration grid of the statistics (docs/statistics.md §7):
# exact enumeration to n = 30 and 20,000 seeded draws a cell, about half an
# hour on 2 cores; it writes docs/calibration-stats.md. `make test` runs a
# reduced grid.
calibrate-stats:
	$(GO) test -count=1 -timeout 3h -run Calibration -v ./assert -args -calibrate -calibrate-out $(CURDIR)/docs/calibration-stats.md

# The lab calibration (docs/statistics.md §7): every random-routing catalog
# scenario on 20 labs with different seeds, and broken variants of each
# that must FAIL; about 40 minutes on 2 cores (two labs at a time). It writes
# docs/calibration-lab.md.
calibrate-lab:
	MESH_VERIFY_LAB_BIN="$$(bash tools/lab/build.sh | tail -n1)" \
	$(GO) test -count=1 -timeout 4h -run TestLabCalibration -parallel 2 -v ./e2e -args -calibrate-lab -calibrate-lab-out $(CURDIR)/docs/calibration-lab.md

# Both calibrations: the statistics' own grid and the lab's seeded runs.
calibrate: calibrate-stats calibrate-lab

# The JSON Schemas of report.json and of scenario files, regenerated from
# the Go types (docs/report-format.md): run after changing the report's or
# the scenario's types, their doc comments, or the presets.
schema:
	$(GO) test -count=1 -run 'Test(Report|Scenario)Schema$$' ./reports ./scenarios -update

# go vet, then staticcheck at the version tools/lint/go.mod pins (its own
# module, as tools/image and tools/release are, so the product's go.mod
# does not carry it; only the Go module proxy is needed), built into bin/.
# A finding is fixed at its root; a //lint:ignore says why where it cannot be.
lint: fmtcheck
	$(GO) vet $(PKGS)
	cd tools/lint && GOWORK=off GOFLAGS=-mod=readonly $(GO) build -o $(abspath $(BIN))/staticcheck honnef.co/go/tools/cmd/staticcheck
	$(BIN)/staticcheck $(PKGS)

fmtcheck:
	@out=$$(gofmt -l .); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Benchmarks against the peer tools (vegeta, hey, siege, wrk), side by side in
# one bounded run, written to BENCHMARKS.md (bench/run.sh; README.md,
# "Benchmarks"; BENCH_QUICK=1 for a short run).
bench: build
	bash bench/run.sh

# Screenshots of report.html (PASS, FAIL, INCONCLUSIVE) from lab runs, for
# the README (scripts/report-shots.sh; needs chromium).
report-shots: build
	bash scripts/report-shots.sh

# Every seed experiment in the local lab, judged (scripts/demo.sh).
demo: build
	bash scripts/demo.sh

# The local lab for poking at with kubectl: make lab-up TOPOLOGY=istio-mirror
# (mesh-verify lab list shows them), then eval "$$(bin/mesh-verify lab env)".
TOPOLOGY ?= skupper-1
lab-up: build
	$(BIN)/mesh-verify lab up --topology $(TOPOLOGY)

lab-down: build
	$(BIN)/mesh-verify lab down

clean:
	rm -rf $(BIN) mesh-verify-runs build $(DIST)
