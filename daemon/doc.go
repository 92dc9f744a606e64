// Package daemon is the leaseside sidecar: it answers local programs on the
// socket (through ipc), keeps the local lease table, binds each lease to its
// owner, relays acquires and releases to the grantor cluster over its gRPC
// contract, and renews every held lease on its own goroutine following the
// timing model of docs/design.md section 2.
//
// Every validity decision reads the clockwatch.Clock: a lease is valid until
// t0 + d(1-rho) - eps, where t0 was read before the request that granted or
// renewed it was sent.
package daemon
