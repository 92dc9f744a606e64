package pki

import (
	"strings"
	"testing"
)

// Peer.Names takes a peer only when its name matches one of the globs.
func TestPeerNames(t *testing.T) {
	want := Peer{Roles: []string{RoleGrantor}, Names: []string{"g[1-3]", "db-*"}}
	for name, ok := range map[string]bool{"g1": true, "g3": true, "db-7": true, "g4": false, "evil": false, "g1x": false} {
		err := want.check(Identity{Role: RoleGrantor, Name: name})
		if (err == nil) != ok {
			t.Errorf("grantor %s: %v, want taken %v", name, err, ok)
		}
		if err != nil && !strings.Contains(err.Error(), "matches none of g[1-3], db-*") {
			t.Errorf("grantor %s: %v, want it to name the globs", name, err)
		}
	}
	if err := (Peer{Roles: []string{RoleGrantor}}).check(Identity{Role: RoleGrantor, Name: "evil"}); err != nil {
		t.Errorf("without names, grantor evil: %v", err)
	}
}
