// Package bench measures a grantor cluster from the outside, as a client
// of its gRPC contract (grantor/grantorpb) and nothing else: grant and
// release throughput, contended handoffs and their latency, keepalive
// throughput, and the leader's memory per live lease.
//
// Every workload checks what it measures: a grant the contract does not
// allow, a keepalive reply that does not renew every lease it listed, or a
// token that does not grow fails the run instead of being counted. Figures
// are reported next to the targets of the project's issue 3; a miss is
// reported as a miss.
//
// The bench only ever acts as a client. Starting the cluster it measures is
// the caller's business (`leaseside dev` for a single node, the scripts in
// this directory for a cluster).
//
// The lock workloads (LockCycles, LockHandoffs) run against any service
// behind the Lock interface, and the measuring parts (Window, Latencies,
// CPUMeter, LeaderMemory, Result) are exported, so that the side-by-side
// bench against etcd (vs-etcd.sh and its Go module in vsetcd/) measures
// both systems with the same loops and checks.
package bench
