// Package clockwatch gives leaseside its sense of time: instants on
// CLOCK_BOOTTIME, which keeps counting while the host is suspended, and a
// fake clock that tests advance by hand and can suspend.
//
// Every decision about whether a lease is still valid, in the sidecar and in
// the grantor, is taken by comparing Instants read from a Clock. Go's own
// timers (and time.Now's monotonic reading) run on CLOCK_MONOTONIC, which
// stops during a suspend; they are used here only to wake up, never to decide.
package clockwatch
