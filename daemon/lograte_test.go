package daemon

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
)

// A keepalive failing 1.5 times a second is logged once, then once per
// warnEvery saying how many were left out; the first success after them
// says how many and for how long (issue 24 item 8).
func TestRateLogLimitsRepeatedWarnings(t *testing.T) {
	var b bytes.Buffer
	r := &rateLog{log: slog.New(slog.NewTextHandler(&b, nil)), every: warnEvery}
	at := clockwatch.Instant(0)
	for range 100 { // a minute of failures
		at = at.Add(666 * time.Millisecond)
		r.warn(at, "keepalive failed", "batch", 1)
	}
	r.ok(at, "keepalives answered again")
	r.ok(at, "keepalives answered again") // nothing to say twice
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3+1 {
		t.Fatalf("%d lines, want 3 warnings (the 1st, 47th and 93rd) and one recovery:\n%s", len(lines), b.String())
	}
	if strings.Contains(lines[0], "more_since_last_line") || !strings.Contains(lines[1], "more_since_last_line=45") || !strings.Contains(lines[2], "more_since_last_line=45") {
		t.Errorf("the first warning is whole, the next counts what was left out:\n%s", b.String())
	}
	if !strings.Contains(lines[3], `msg="keepalives answered again" failures=100 for=1m5.934s`) {
		t.Errorf("the recovery line: %s", lines[3])
	}
}

// The daemon logs the grantor that answers as leader when it changes (a
// failover); an acquire that may not wait is refused at once only after
// no leader answered for failFastAfter, never while one does.
func TestLeaderChangeLoggedAndFailFast(t *testing.T) {
	var b bytes.Buffer
	clock := clockwatch.NewFake(clockwatch.Instant(time.Hour))
	d := &Daemon{clock: clock, log: slog.New(slog.NewTextHandler(&b, nil)), reach: reach{firstOK: make(chan struct{})}}
	d.contact("g1:7401", nil)
	d.contact("g1:7401", nil)
	down := errors.New("connection refused")
	d.contact("g1:7401", down)
	if err := d.leaderUnreachable(clock.Now()); err != nil {
		t.Errorf("refused at the first failure: %v", err)
	}
	clock.Advance(failFastAfter - time.Millisecond)
	d.contact("", down)
	if err := d.leaderUnreachable(clock.Now()); err != nil {
		t.Errorf("refused before failFastAfter: %v", err)
	}
	clock.Advance(time.Millisecond)
	err := d.leaderUnreachable(clock.Now())
	if err == nil || !strings.Contains(err.Message, "no grantor leader has answered this sidecar for 3s") {
		t.Errorf("after failFastAfter without an answer: %v", err)
	}
	d.contact("g2:7401", nil)
	if err := d.leaderUnreachable(clock.Now()); err != nil {
		t.Errorf("refused after a leader answered: %v", err)
	}
	logged := b.String()
	if strings.Count(logged, "the grantor leader changed") != 1 || !strings.Contains(logged, "grantor=g2:7401 previous=g1:7401") {
		t.Errorf("want one line naming the new leader:\n%s", logged)
	}
}
