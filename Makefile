# leaseside: `make test` is what CI runs (.ci/run); it installs what it needs.
GO ?= go
PROTOC_GEN_GO_GRPC ?= google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
PROTOC_GEN_GO ?= google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12

.PHONY: all build run test deps lint generate bench

all: build

build:
	$(GO) build -o bin/leaseside ./cmd/leaseside

run:
	$(GO) run ./cmd/leaseside dev

# Debian packages the tests use: python3 (the Python client and protocol
# examples) and socat (the shell example).
deps:
	@if ! command -v python3 >/dev/null || ! command -v socat >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 socat >/dev/null; \
	fi
	$(GO) mod download

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l . | grep -v '\.pb\.go$$'); if [ -n "$$out" ]; then echo "gofmt -l lists:"; echo "$$out"; exit 1; fi

test: deps lint
	$(GO) test -race -count=1 -timeout 14m ./...

# Regenerates the committed gRPC code from grantor/grantorpb/grantor.proto.
generate:
	@command -v protoc >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler)
	$(GO) install $(PROTOC_GEN_GO) $(PROTOC_GEN_GO_GRPC)
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" $(GO) generate ./grantor/grantorpb

bench:
	$(GO) test -run '^$$' -bench . -benchtime 3s ./...
