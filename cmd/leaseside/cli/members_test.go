package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

func TestPrintMembers(t *testing.T) {
	out := membersFromPB(&grantorpb.MembersResponse{LeaderId: "g1", AnsweredBy: "g1", Members: []*grantorpb.Member{
		{Name: "g1", Role: "grantor", NodeId: "g1", RpcAddr: "10.0.0.1:7401", RaftAddr: "10.0.0.1:7402", GossipAddr: "10.0.0.1:7403",
			GossipState: "alive", Voter: true, RaftState: "leader", LastContactMs: -1},
		{Name: "g2", Role: "grantor", NodeId: "g2", RpcAddr: "10.0.0.2:7401", RaftAddr: "10.0.0.2:7402", GossipAddr: "10.0.0.2:7403",
			GossipState: "dead", Voter: true, RaftState: "follower", LastContactMs: 12345},
		{Role: "grantor", NodeId: "g3", RaftAddr: "10.0.0.3:7402", Voter: false, RaftState: "follower", LastContactMs: 40},
		{Name: "web1", Role: "sidecar", GossipAddr: "10.0.1.1:7946", GossipState: "alive", LastContactMs: -1},
	}})
	var b bytes.Buffer
	printMembers(&b, out)
	want := []string{
		"NAME  ROLE     NODE-ID  RPC           RAFT          GOSSIP        STATE  VOTER  RAFT-STATE  LAST-CONTACT",
		"g1    grantor  g1       10.0.0.1:7401  10.0.0.1:7402  10.0.0.1:7403  alive  true   leader      -",
		"g2    grantor  g2       10.0.0.2:7401  10.0.0.2:7402  10.0.0.2:7403  dead   true   follower    12.345s",
		"-     grantor  g3       -             10.0.0.3:7402  -             -      false  follower    40ms",
		"web1  sidecar  -        -             -             10.0.1.1:7946  alive  -      -           -",
		"",
		"leader: g1",
	}
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	norm := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	if len(got) != len(want) {
		t.Fatalf("table:\n%s", b.String())
	}
	for i := range want {
		if norm(got[i]) != norm(want[i]) {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
	if out.Members[0].LastContactMs != -1 || out.Members[1].LastContactMs != 12345 || out.Members[3].Role != "sidecar" {
		t.Errorf("conversion: %+v", out.Members)
	}
	b.Reset()
	printMembers(&b, membersOutput{Members: []ipc.Member{}})
	if !strings.Contains(b.String(), "no leader known") {
		t.Errorf("no leader: %q", b.String())
	}
}

func TestMembersUsage(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{name: "no sidecar", args: []string{"members", "--socket", sock}, code: ExitUnavailable},
		{name: "no grantor answers", args: []string{"members", "--grantors", "127.0.0.1:1", "--timeout", "2s"}, code: ExitUnavailable, want: "no grantor answered"},
		{name: "remove without grantors", args: []string{"members", "remove", "g2"}, code: ExitUsage, want: "needs --grantors"},
		{name: "remove without node", args: []string{"members", "remove", "--grantors", "127.0.0.1:1"}, code: ExitUsage},
		{name: "extra argument", args: []string{"members", "g2"}, code: ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(tt.args, &stdout, &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
		})
	}
}
