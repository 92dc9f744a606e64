// Package clockwatch gives leaseside its sense of time: instants on
// CLOCK_BOOTTIME, which keeps counting while the host is suspended, and a
// fake clock that tests advance by hand and can suspend.
//
// Every decision about whether a lease is still valid, in the sidecar and in
// the grantor, is taken by comparing Instants read from a Clock. Go's own
// timers (and time.Now's monotonic reading) run on CLOCK_MONOTONIC, which
// stops during a suspend; they are used here only to wake up, never to decide.
//
// It also watches for every way the host's clock can lie, and reports it so
// that validity is shortened or ended, never extended: SuspendDetector (the
// host slept), PauseDetector (this process did not run), KernelClock (NTP
// lost sync) and DriftEstimator (the local clock's rate against the
// grantor's, from keepalive round trips). Watcher runs them together and
// turns them into Events; Timing.WithObservedRate is the one rule by which
// an observation changes deadlines, and it only ever raises rho.
package clockwatch
