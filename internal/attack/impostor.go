package attack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// ImpostorToken is the fencing token an Impostor grants: above any a real
// cluster reaches, so a resource that fences would refuse the real
// holder after it saw this one.
const ImpostorToken = 1 << 60

// Impostor is a grantor that is no member of any cluster: the holder of a
// grantor certificate of a name in no configuration and of the gossip
// key (every sidecar that joins gossip has it) serves the Grantor API
// under that certificate and gossips itself as the leader, from enough
// gossip members that its claim outvotes the real leader's. It grants
// every Acquire it gets, and counts them.
type Impostor struct {
	// Acquires counts the Acquire calls it answered with a grant.
	Acquires atomic.Int64
	srv      *grpc.Server
	members  []*gossip.Member
	addr     string
}

// impostorAPI is the Impostor's Grantor service.
type impostorAPI struct {
	grantorpb.UnimplementedGrantorServer
	im   *Impostor
	name string
}

func (a impostorAPI) Acquire(_ context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	a.im.Acquires.Add(1)
	return &grantorpb.AcquireResponse{Granted: true, Token: ImpostorToken, GrantorTimeNs: clockwatch.System.Now().Nanoseconds(),
		TtlNs: req.GetTtlNs(), Limit: 1, Holders: 1}, nil
}

func (a impostorAPI) Members(context.Context, *grantorpb.MembersRequest) (*grantorpb.MembersResponse, error) {
	return &grantorpb.MembersResponse{LeaderId: a.name, AnsweredBy: a.name,
		Members: []*grantorpb.Member{{NodeId: a.name, Role: gossip.RoleGrantor, RpcAddr: a.im.addr, Voter: true, RaftState: "leader"}}}, nil
}

// KeepAlive reads the stream and never answers: a sidecar's leases lapse
// at their deadline, after its holders acted on the grant.
func (a impostorAPI) KeepAlive(st grantorpb.Grantor_KeepAliveServer) error {
	for {
		if _, err := st.Recv(); err != nil {
			return nil
		}
	}
}

// StartImpostor serves the Grantor API as grantor name with creds (the
// grantor certificate's server credentials) on a loopback port, and
// gossips, with keys, at seeds, as grantor name leading itself, from
// 1+claims members (each claim one more vote for it as the leader).
func StartImpostor(ctx context.Context, name string, creds credentials.TransportCredentials, keys [][]byte, seeds []string, claims int) (*Impostor, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	im := &Impostor{srv: grpc.NewServer(grpc.Creds(creds)), addr: lis.Addr().String()}
	grantorpb.RegisterGrantorServer(im.srv, impostorAPI{im: im, name: name})
	go func() { _ = im.srv.Serve(lis) }()
	for i := range 1 + claims {
		id := name
		if i > 0 {
			id = fmt.Sprintf("%s-claim-%d", name, i)
		}
		m, err := gossip.Start(ctx, gossip.Config{Name: id, BindAddr: "127.0.0.1:0", Join: seeds, Keys: keys,
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: id, RPCAddr: im.addr, RaftAddr: im.addr, LeaderID: name}})
		if err != nil {
			im.Close()
			return nil, fmt.Errorf("gossip member %s: %w", id, err)
		}
		im.members = append(im.members, m)
	}
	return im, nil
}

// Addr is the Impostor's gRPC address.
func (im *Impostor) Addr() string { return im.addr }

// Close stops serving and gossiping.
func (im *Impostor) Close() error {
	var errs []error
	for _, m := range im.members {
		errs = append(errs, m.Shutdown())
	}
	im.srv.Stop()
	return errors.Join(errs...)
}
