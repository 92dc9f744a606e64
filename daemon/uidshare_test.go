package daemon

import (
	"testing"

	"github.com/leaseside/leaseside/grantor"
)

// One local user holding every lease the daemon allows it must leave the
// host's other users room under the grantors' default limit for the
// whole sidecar: found by the local-account red team (issue 21), where
// the default of 10,000 leases per uid was more than the 8,192 the
// grantors let one sidecar identity hold, so one user could make every
// other user's acquire on the host fail with resource_exhausted.
func TestOneUserCannotTakeTheHostsLeaseLimit(t *testing.T) {
	if 4*DefaultMaxLeasesPerUID > grantor.DefaultMaxLeases {
		t.Fatalf("one uid may hold %d leases by default, more than a quarter of the %d the grantors let this host's sidecar hold", DefaultMaxLeasesPerUID, grantor.DefaultMaxLeases)
	}
}
