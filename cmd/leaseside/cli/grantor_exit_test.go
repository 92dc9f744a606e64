package cli

import (
	"fmt"
	"testing"

	"github.com/leaseside/leaseside/grantor"
)

// The exit status of `leaseside grantor` for what stopped it: a retired
// grantor (removed while it was down, no join rule admits it) exits 78
// and a halt on a raft log entry 65, which the unit does not restart on;
// any other error exits 1.
func TestGrantorExitCodes(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("stopped: %w", grantor.ErrHalted), ExitHalted},
		{&grantor.RetiredError{NodeID: "g3", Leader: "g1", Voters: []string{"g1", "g2"}, Confirmed: []string{"g1", "g2"}}, ExitRetired},
		{fmt.Errorf("stopped: %w", &grantor.RetiredError{NodeID: "g3", Leader: "g1"}), ExitRetired},
		{fmt.Errorf("grantor: serving gRPC: broken"), ExitError},
	} {
		if got := grantorExit(tt.err); got != tt.want {
			t.Errorf("grantorExit(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
