package daemon

import (
	"strings"
	"testing"
	"time"
)

// Rule (SECURITY.md, sessions at the grantor): a session belongs to the
// identity that uses it first, so a session id this sidecar has not used
// yet must not be computable from the ones it has: its base id is in its
// log ("leaseside daemon ready") and every session it uses is in the
// grantors' audit trail. Before, the session of term d was BASE-dms: a
// holder of another sidecar certificate who saw one line opened BASE-20000ms
// first, and every acquire of 20 s on the host was refused (red team,
// issue 21, on real processes). Each id still starts with the base, which
// hideSession replaces in what other local users are told, and fits the
// grantors' 64 bytes at the longest term.
func TestUnusedSessionsCannotBeComputedFromTheBase(t *testing.T) {
	a, err := newGrantorConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := newGrantorConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.session = a.session
	for _, ttl := range []time.Duration{time.Second, 20 * time.Second, 24 * time.Hour} {
		sa, sb := a.sessionFor(ttl).id, b.sessionFor(ttl).id
		if sa == sb {
			t.Errorf("two daemons of base %s both use %s for term %v: it is computable from the base", a.session, sa, ttl)
		}
		if !strings.HasPrefix(sa, a.session) || len(sa) > 64 {
			t.Errorf("session %q (%d bytes) of term %v: want the base %s first, at most 64 bytes", sa, len(sa), ttl, a.session)
		}
		if again := a.sessionFor(ttl).id; again != sa {
			t.Errorf("term %v: session %s, then %s", ttl, sa, again)
		}
	}
}
