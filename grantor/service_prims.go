package grantor

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// The gRPC handlers of the coordination primitives (issue 12): Proclaim,
// Watch and CheckToken. Acquire's limit and value are in service.go.

// proclaim proposes a Proclaim: the holder's new value for its grant.
func (l *lessor) proclaim(ctx context.Context, c proclaimCmd) (*proclaimResult, error) {
	o, err := l.await(ctx)
	if err != nil {
		return nil, err
	}
	if l.prop.allowed() < cmdProclaim {
		return nil, ErrNotSupported
	}
	defer l.touch(o, c.ID.Session, 0)()
	res, err := l.prop.apply(encodeCmd(cmdProclaim, c))
	if err != nil {
		return nil, err
	}
	switch r := res.(type) {
	case error:
		return nil, r
	case *proclaimResult:
		return r, nil
	}
	panic("grantor: unexpected proclaim result")
}

// Proclaim implements grantorpb.GrantorServer.
func (s *service) Proclaim(ctx context.Context, req *grantorpb.ProclaimRequest) (*grantorpb.ProclaimResponse, error) {
	c, err := validProclaim(req)
	if err != nil {
		return nil, toStatus(err)
	}
	who := IdentityFrom(ctx)
	if err := s.n.accounts.takeUnchanged(who); err != nil {
		return nil, toStatus(err)
	}
	c.Identity = who.owner()
	if err := s.n.accounts.checkRequest(who, c.ID, len(c.Value), false); err != nil {
		return nil, toStatus(err)
	}
	res, err := s.n.lessor.proclaim(ctx, c)
	if err != nil {
		return nil, toStatus(err)
	}
	if res.Proclaimed {
		s.n.accounts.changedAfterAll(who)
	}
	s.n.audit.proclaim(who, c.Lease, c.Token, res.Proclaimed)
	return &grantorpb.ProclaimResponse{Proclaimed: res.Proclaimed}, nil
}

// CheckToken implements grantorpb.GrantorServer (checktoken.go).
func (s *service) CheckToken(ctx context.Context, req *grantorpb.CheckTokenRequest) (*grantorpb.CheckTokenResponse, error) {
	if err := validLeaseName("lease", req.GetLease()); err != nil {
		return nil, toStatus(err)
	}
	if req.GetToken() < 1 {
		return nil, toStatus(invalid("token", "token must be at least 1"))
	}
	live, tokens, err := s.n.lessor.checkToken(ctx, req.GetLease(), req.GetToken())
	if err != nil {
		return nil, toStatus(err)
	}
	return &grantorpb.CheckTokenResponse{Live: live, Tokens: tokens}, nil
}

// watchable splits names into those the name rules let id watch and
// those they do not (audited).
func (n *Node) watchable(id Identity, names []string) (add, denied []string) {
	for _, name := range names {
		if err := n.allowName(id, name, AccessRead); err != nil {
			n.audit.refused(id, "Watch", status.Convert(err).Message(), "lease", name)
			denied = append(denied, name)
			continue
		}
		add = append(add, name)
	}
	if len(denied) == 0 {
		return names, nil
	}
	return add, denied
}

// Watch implements grantorpb.GrantorServer (watch.go). A name the name
// rules do not let the caller watch gets a DENIED event and is not
// watched; the stream goes on. The stream belongs
// to the office it started in, as KeepAlive's does: it ends with NotLeader
// when this node leaves office.
func (s *service) Watch(stream grpc.BidiStreamingServer[grantorpb.WatchRequest, grantorpb.WatchEvent]) error {
	ctx := stream.Context()
	o, err := s.n.lessor.await(ctx)
	if err != nil {
		return toStatus(err)
	}
	if s.n.lessor.prop.allowed() < cmdProclaim {
		return toStatus(ErrNotSupported)
	}
	who := IdentityFrom(ctx)
	w, err := s.n.watch.open(who)
	if err != nil {
		return toStatus(err)
	}
	defer w.close()
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err == nil {
				err = validWatch(req)
			}
			if err == nil {
				add, denied := s.n.watchable(who, req.GetAdd())
				if err = w.update(req.GetRemove(), add); err == nil && len(denied) > 0 {
					w.deny(denied)
				}
			}
			if err != nil {
				recvErr <- err
				return
			}
		}
	}()
	for {
		select {
		case <-w.wake:
			evs, err := w.take()
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if err := stream.Send(ev); err != nil {
					return err
				}
			}
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil
			}
			if _, ok := status.FromError(err); ok {
				return err
			}
			return toStatus(err)
		case <-o.ctx.Done():
			return toStatus(s.n.lessor.prop.notLeader())
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}
