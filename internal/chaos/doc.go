// Package chaos is leaseside's randomized fault suite: real leaseside
// processes (3 or 5 grantors, 2 to 4 sidecar hosts, each in a network
// namespace of its own, see internal/netlab), real client processes on
// the sidecar hosts that use the socket the way users do (exclusive
// leases, a semaphore and an election) and write to a fenced register
// with their tokens (see package workload), and a
// nemesis that follows a schedule made from a seed: partitions of every
// shape, one-way and flapping links, kill -9 and SIGSTOP of grantors
// (the leader most), sidecars and clients, a sidecar stalled again and
// again (stopped and continued), CPU and disk starvation through
// cgroups, CLOCK_REALTIME steps, grantors restarted with BOOTTIME offsets
// in time namespaces, rolling restarts and membership changes.
//
// Everything that happens is recorded on the machine's one
// CLOCK_BOOTTIME, and checkers read the history afterwards: believed
// intervals of two holders of one name never overlap (of a semaphore's,
// no more than its limit; an interval lasts as long as the holder process
// could have believed: its own client's deadline, sent with each register
// write, counts, and a kill ends it only at the kill); the fenced
// register's history holds, and accepts no write from a holder after the
// end it recorded itself or its deadline;
// tokens strictly increase per name; each name's acquires and releases
// are linearizable (porcupine); no renewal is confirmed on a side of a
// partition without a quorum of grantors; no grant's deadline outruns
// the call that got it by more than its term; a name clients want is
// granted within a bound of fault-free time after a heal; leases come
// free once their holders are gone; nothing crashes or races (clients
// and run included). A name whose linearizability is not decided in time
// fails the run. A run writes report.json, a
// timeline picture and every process's log to its output directory.
//
// TestChaos is the entry point: a short run of a fixed seed and a random
// one in every `go test`, and as long a run as asked with
// -chaos.duration (chaos.sh runs it by hand).
package chaos
