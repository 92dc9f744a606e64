package grantor

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
)

// liar answers Members for a voter it is not: it names the voter as its
// sender and lists a configuration without the asking node.
type liar struct {
	grantorpb.UnimplementedGrantorServer
	as string
}

func (l liar) Members(context.Context, *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	return &grantorpb.MembersResponse{LeaderId: l.as, AnsweredBy: l.as,
		Members: []*grantorpb.Member{{NodeId: l.as, Voter: true, RaftState: "Leader"}}}, nil
}

// A grantor that asks whether it was removed (self_removal.go) takes the
// voter's address from gossip, which a holder of the gossip key writes,
// and the answer's AnsweredBy is the answerer's say. A grantor
// certificate of a name in no configuration (g9) answering for voter n1
// must not count as n1's answer: the dial requires n1's certificate.
func TestRemovalAskRefusesAnotherNamesAnswer(t *testing.T) {
	p := newTestPKI(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(p.conf(pki.RoleGrantor, "g9").ServerCredentials()))
	grantorpb.RegisterGrantorServer(srv, liar{as: "n1"})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	n := start(t, cfg, true)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if resp, err := n.membersOf(ctx, "n1", lis.Addr().String()); err == nil {
		t.Fatalf("g9's answer for n1 was taken (answered by %q, leader %q)", resp.GetAnsweredBy(), resp.GetLeaderId())
	}
	if _, err := n.membersOf(ctx, "g9", lis.Addr().String()); err != nil {
		t.Fatalf("asking g9 as g9: %v", err)
	}
}

// RemoveServer answers every removal as done.
func (l liar) RemoveServer(context.Context, *grantorpb.RemoveServerRequest) (*grantorpb.RemoveServerResponse, error) {
	return &grantorpb.RemoveServerResponse{}, nil
}

// Every call a grantor makes to another (callPeer: a Leave's
// RemoveServer to the leader, a registration, bootstrap-expect's
// question) dials an address that may come from gossip: with TLS it takes
// only the grantor certificate of the grantor it means. A grantor
// certificate of a name in no configuration (g9) at the leader's gossiped
// address does not take a Leave's RemoveServer for leader n1 (which would
// let the leaving grantor stop while still a member).
func TestCallPeerTakesOnlyTheNamedGrantor(t *testing.T) {
	p := newTestPKI(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(p.conf(pki.RoleGrantor, "g9").ServerCredentials()))
	grantorpb.RegisterGrantorServer(srv, liar{as: "n1"})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	cfg := fastConfig(t, t.TempDir())
	cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
	n := start(t, cfg, true)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	remove := func(ctx context.Context, c grantorpb.GrantorClient) error {
		_, err := c.RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: cfg.NodeID})
		return err
	}
	if err := n.callPeer(ctx, "n1", lis.Addr().String(), remove); err == nil {
		t.Fatal("g9 took a RemoveServer meant for n1")
	}
	if err := n.callPeer(ctx, "g9", lis.Addr().String(), remove); err != nil {
		t.Fatalf("calling g9 as g9: %v", err)
	}
}
