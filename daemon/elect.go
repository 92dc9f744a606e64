package daemon

import (
	"context"
	"strconv"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// The socket operations of the coordination primitives (issue 12):
//
//   - elect is an acquire whose grant carries a value; resign is a
//     release. Both take the owner's turn for the name like acquire and
//     release (turns.go).
//   - proclaim changes the value of a grant this host holds, at the
//     grantor (one raft entry naming the token, no new token), under the
//     owner's turn, so it cannot overtake the owner's acquire or release.
//   - observe and watch with holders subscribe the connection to the
//     name's holders cluster-wide (holderwatch.go).
//   - check_token asks the grantor leader whether a token is a live
//     grant (grantor/checktoken.go); a relay, with no state here.

// handlePrims answers the operations of protocol 3; ok is false for the
// others.
func (d *Daemon) handlePrims(ctx context.Context, c *ipc.Conn, req *ipc.Request) (resp *ipc.Response, ok bool) {
	switch {
	case req.Op == ipc.OpElect:
		return grantResponse(d.acquire(ctx, c, req)), true
	case req.Op == ipc.OpResign:
		tok, err := d.release(ctx, c, req.Lease, req.Token, "")
		if err != nil {
			return &ipc.Response{Error: err}, true
		}
		return &ipc.Response{ReleasedToken: strconv.FormatUint(tok, 10)}, true
	case req.Op == ipc.OpProclaim:
		return grantResponse(d.proclaim(ctx, c, req.Lease, req.Token, req.ValueString())), true
	case req.Op == ipc.OpCheckToken:
		return d.checkToken(ctx, req.Lease, req.Token), true
	case req.Op == ipc.OpObserve, req.Op == ipc.OpWatch && req.Holders:
		if err := d.hw.subscribe(c, req.Lease, req.Op == ipc.OpObserve); err != nil {
			return &ipc.Response{Error: err}, true
		}
		return &ipc.Response{}, true
	}
	return nil, false
}

// proclaim sets the value of a grant this host holds.
func (d *Daemon) proclaim(ctx context.Context, c *ipc.Conn, name, token, value string) (*ipc.Grant, *ipc.Error) {
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	d.mu.Lock()
	l, err := d.heldByLocked(c, name, token, d.checkSuspend())
	d.mu.Unlock()
	if err != nil {
		return nil, err
	}
	done, terr := d.turns.take(rctx, l.ownerID, name)
	if terr != nil {
		return nil, ipc.Errorf(ipc.CodeUnavailable, "an earlier request for %q did not finish in time", name)
	}
	defer done()
	ok, gerr := d.g.proclaim(rctx, l.sess, name, l.ownerID, l.token, value)
	if gerr != nil {
		return nil, grantorError(gerr)
	}
	if !ok {
		return nil, ipc.Errorf(ipc.CodeNotHeld, "the grantor no longer holds %q with token %d for this host; nothing was proclaimed", name, l.token)
	}
	now := d.checkSuspend()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.validLocked(l.tableKey(), now) != l {
		return nil, ipc.Errorf(ipc.CodeLost, "lease %q was lost before the reply could be sent", name)
	}
	l.value = value
	d.logPutLocked(l)
	return l.grant(now), nil
}

// checkToken asks the grantor leader whether token is a live grant of
// name.
func (d *Daemon) checkToken(ctx context.Context, name, token string) *ipc.Response {
	tok, err := strconv.ParseUint(token, 10, 64)
	if err != nil || tok == 0 {
		return &ipc.Response{Error: ipc.Errorf(ipc.CodeBadRequest, "token must be a positive decimal integer, got %q", token)}
	}
	rctx, cancel := context.WithTimeout(ctx, d.cfg.RequestTimeout)
	defer cancel()
	resp, gerr := retry(rctx, d.g, callOpts{attempt: attemptTimeout, leader: true}, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.CheckTokenResponse, error) {
		return api.CheckToken(ctx, &grantorpb.CheckTokenRequest{Lease: name, Token: tok})
	})
	if gerr != nil {
		return &ipc.Response{Error: grantorError(gerr)}
	}
	live := resp.Live
	tokens := make([]string, len(resp.Tokens))
	for i, t := range resp.Tokens {
		tokens[i] = strconv.FormatUint(t, 10)
	}
	return &ipc.Response{Live: &live, Tokens: tokens}
}

// proclaim relays a Proclaim of session s, retried with one request id.
func (g *grantorConn) proclaim(ctx context.Context, s *gsession, name, owner string, token uint64, value string) (bool, error) {
	id, done := g.newID(s)
	defer done()
	req := &grantorpb.ProclaimRequest{Id: id, Lease: name, Owner: owner, Token: token, Value: value}
	resp, err := retry(ctx, g, callOpts{attempt: attemptTimeout, leader: true}, func(ctx context.Context, api grantorpb.GrantorClient) (*grantorpb.ProclaimResponse, error) {
		return api.Proclaim(ctx, req)
	})
	if err != nil {
		return false, err
	}
	return resp.Proclaimed, nil
}
