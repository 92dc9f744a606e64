// Package grantorpb is the wire contract between a leaseside sidecar and the
// grantor cluster: protobuf messages and the gRPC service, generated from
// grantor.proto. The sidecar depends on this package, never on the grantor's
// internals. Regenerate with `go generate ./grantor/grantorpb` (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc; `make generate` installs them).
package grantorpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative grantor.proto
