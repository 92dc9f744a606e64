// Package integration holds tests that build the real leaseside binary and
// drive it as users do: real processes, real sockets, real signals, a real
// raft log on disk.
package integration
