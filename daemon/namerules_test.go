package daemon

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/ipc"
)

// The grantors' name rules, seen through the daemon: an acquire or a
// token check of a name outside them is name_not_allowed; a watch of one
// gets watch_refused and ends (an observer's channel closes), while the
// host's one Watch stream goes on carrying the names it may watch.
func TestGrantorsNameRulesThroughTheDaemon(t *testing.T) {
	rules, err := grantor.ParseNameRules("rules", []byte("insecure acquire jobs/\n"))
	if err != nil {
		t.Fatal(err)
	}
	addr := startGrantorWith(t, clockwatch.System, clockwatch.DefaultTiming(), func(c *grantor.Config) { c.NameRules = rules })
	c := client(t, runDaemon(t, addr))
	evs := make(chan *ipc.Event, 64)
	c.Notify(evs)

	notAllowed := func(what string, err error) {
		t.Helper()
		var ie *ipc.Error
		if !errors.As(err, &ie) || ie.Code != ipc.CodeNameNotAllowed || !strings.Contains(ie.Message, `"db/x"`) {
			t.Fatalf("%s: %v, want name_not_allowed naming db/x", what, err)
		}
	}
	_, err = c.Acquire(ctxT(t), "db/x", ipc.AcquireOptions{TTL: 5 * time.Second})
	notAllowed("acquire", err)
	_, _, err = c.CheckToken(ctxT(t), "db/x", "1")
	notAllowed("check_token", err)

	if err := c.WatchHolders(ctxT(t), "jobs/x"); err != nil {
		t.Fatal(err)
	}
	leaders, err := c.Observe(ctxT(t), "db/x")
	if err != nil {
		t.Fatal(err)
	}
	var synced, refused bool
	for !synced || !refused {
		select {
		case ev := <-evs:
			switch {
			case ev.Event == ipc.EventHolder && ev.Lease == "jobs/x":
				synced = true
			case ev.Event == ipc.EventWatchRefused && ev.Lease == "db/x" && ev.Reason == ipc.CodeNameNotAllowed:
				refused = true
			case ev.Lease == "db/x":
				t.Fatalf("an event of the refused name: %+v", ev)
			}
		case <-ctxT(t).Done():
			t.Fatalf("jobs/x synced %v, db/x refused %v", synced, refused)
		}
	}
	select {
	case v, ok := <-leaders:
		if ok {
			t.Fatalf("the refused observer got %+v", v)
		}
	case <-ctxT(t).Done():
		t.Fatal("the refused observer's channel stayed open")
	}

	l, err := c.Acquire(ctxT(t), "jobs/x", ipc.AcquireOptions{TTL: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-evs:
			if ev.Event == ipc.EventHolder && ev.Lease == "jobs/x" && ev.Change == ipc.ChangeAcquired && ev.Token == l.Token {
				return // the stream still carries jobs/x
			}
		case <-ctxT(t).Done():
			t.Fatal("no holder event for jobs/x after the refusal")
		}
	}
}
