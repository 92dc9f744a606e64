# leaseside: `make test` is what CI runs (.ci/run); it installs what it needs.
GO ?= go
PROTOC_GEN_GO_GRPC ?= google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTOC_GEN_GO ?= google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12

# The side-by-side bench against etcd is a module of its own (its etcd
# client and plotting library stay out of ours); it is vetted and tested
# with the rest.
VSETCD := internal/bench/vsetcd

.PHONY: all build run test deps lint generate bench bench-compare metrics-doc

all: build

build:
	$(GO) build -o bin/leaseside ./cmd/leaseside

run:
	$(GO) run ./cmd/leaseside dev

# Debian packages the tests use: python3 and python3-venv (the Python
# client, its pip install and the protocol examples; /usr/bin/python3 also
# runs, as an unprivileged user, the socket abuse tests), socat (the shell
# example), iproute2 and util-linux (network namespaces for the fault
# tests: ip, unshare, nsenter), etcd-server (the side-by-side bench's etcd
# workloads, internal/bench/vsetcd), tmux (the terminal of leaseside top's
# test), prometheus (the alert rules and dashboard in packaging/ are tried
# on a real one; its package may start a prometheus service where systemd
# runs), postgresql-15 and redis-server (the fences' tests start throwaway
# servers of their own, internal/stores; the packages' own services are not
# used), python3-psycopg2 and python3-redis (the Python examples of the
# fences), postgresql-client (psql, the shell example), curl (the shell
# example of leaseside fence-proxy, the paused-worker test).
deps:
	@if ! command -v python3 >/dev/null || ! python3 -c 'import ensurepip' 2>/dev/null || [ ! -x /usr/bin/python3 ] || ! command -v socat >/dev/null \
		|| ! command -v ip >/dev/null || ! command -v nsenter >/dev/null || ! command -v unshare >/dev/null \
		|| ! command -v etcd >/dev/null || ! command -v tmux >/dev/null || [ ! -f /usr/share/bash-completion/bash_completion ] \
		|| ! command -v curl >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv socat iproute2 util-linux etcd-server tmux \
			bash-completion curl >/dev/null; \
	fi
	@if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	fi
	@if ! ls /usr/lib/postgresql/15/bin/initdb >/dev/null 2>&1 || ! command -v psql >/dev/null || ! command -v redis-server >/dev/null \
		|| ! command -v redis-cli >/dev/null || ! /usr/bin/python3 -c 'import psycopg2, redis' 2>/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 postgresql-client \
			redis-server redis-tools python3-psycopg2 python3-redis >/dev/null; \
	fi
	$(GO) mod download
	$(GO) -C $(VSETCD) mod download

lint:
	$(GO) vet ./...
	$(GO) -C $(VSETCD) vet ./...
	@out=$$(gofmt -l . | grep -v '\.pb\.go$$'); if [ -n "$$out" ]; then echo "gofmt -l lists:"; echo "$$out"; exit 1; fi

test: deps lint
	$(GO) test -race -count=1 -timeout 14m ./...
	$(GO) -C $(VSETCD) test -race -count=1 -timeout 5m ./...

# Regenerates the committed gRPC code from grantor/grantorpb/grantor.proto.
generate:
	@command -v protoc >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler)
	$(GO) install $(PROTOC_GEN_GO)
	$(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" $(GO) generate ./grantor/grantorpb

# Regenerates METRICS.md from the collectors the metrics ports register
# (after adding or changing a metric; TestMetricsDoc fails until then).
metrics-doc:
	$(GO) generate ./cmd/leaseside/cli

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./...

# The hot paths' benchmarks (FSM apply, lessor acquire/release, keepalives,
# socket round trip, encode/decode) at BASE and in the working tree,
# interleaved, compared by benchstat: `make bench-compare BASE=main~5`.
# ROUNDS (6) and BENCHTIME (1s) tune it; docs/performance.md says more.
ROUNDS ?= 6
BENCHTIME ?= 1s
bench-compare:
	@test -n "$(BASE)" || { echo "usage: make bench-compare BASE=REV [ROUNDS=6] [BENCHTIME=1s]" >&2; exit 2; }
	GO=$(GO) ROUNDS=$(ROUNDS) BENCHTIME=$(BENCHTIME) internal/bench/bench-compare.sh $(BASE)

# Packages: bin/leaseside with PKG_VERSION stamped in, then a .deb and an
# .rpm of it in dist/. nfpm is built from its own module (packaging/tools)
# so that its dependencies stay out of ours. Override any of these, e.g.
# `make package PKG_VERSION=1.2.3`; the default is the v* tag on HEAD, else
# 0.0.0-dev.g<commit>. SOURCE_DATE_EPOCH (HEAD's commit time) dates the
# files in the packages and the man pages, so the same commit packs the
# same way. The man pages and shell completions are generated (for the
# host: they are text) from the CLI's definitions into PKG_SHARE.
PKG_VERSION ?= $(shell v=$$(git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null); \
	if [ -n "$$v" ]; then echo "$$v" | cut -c2-; else echo "0.0.0-dev.g$$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; fi)
PKG_ARCH ?= $(shell $(GO) env GOARCH)
PKG_MAINTAINER ?= leaseside maintainers <maintainers@leaseside.invalid>
PKG_BIN ?= bin/leaseside
NFPM ?= bin/nfpm
DIST ?= dist
PKG_SHARE ?= $(DIST)/share
PKG_DATE = $${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || date +%s)}

.PHONY: package
package:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(PKG_ARCH) $(GO) build -trimpath \
		-ldflags "-s -w -X github.com/leaseside/leaseside/cmd/leaseside/cli.Version=$(PKG_VERSION)" \
		-o $(PKG_BIN) ./cmd/leaseside
	GOOS= GOARCH= $(GO) -C packaging/tools build -o $(abspath $(NFPM)) github.com/goreleaser/nfpm/v2/cmd/nfpm
	rm -rf $(PKG_SHARE)
	SOURCE_DATE_EPOCH=$(PKG_DATE) GOOS= GOARCH= $(GO) run ./packaging/gendocs -version '$(PKG_VERSION)' -out $(PKG_SHARE)
	mkdir -p $(DIST)
	for p in deb rpm; do \
		SOURCE_DATE_EPOCH=$(PKG_DATE) \
		PKG_VERSION='$(PKG_VERSION)' PKG_ARCH='$(PKG_ARCH)' PKG_BIN='$(PKG_BIN)' PKG_SHARE='$(PKG_SHARE)' PKG_MAINTAINER='$(PKG_MAINTAINER)' \
		$(abspath $(NFPM)) package --config packaging/nfpm.yaml --packager $$p --target $(DIST)/ || exit 1; \
	done
