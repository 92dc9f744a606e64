package attack

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// NameEscapes tries, as the caller of c (a grantor leader), every way it
// knows to touch the name outside, which the grantors' name rules do not
// give the caller, from inside prefix, which they do (acquire): an
// Acquire plain, waiting, as a semaphore and as an election; a Proclaim;
// a CheckToken; a Watch of it alone, with its removal in the same
// request, and beside an allowed name; and a path out of prefix
// (prefix/../outside). It returns what got through, one line each: none
// when the rules hold. session names the attacker's session.
func NameEscapes(ctx context.Context, c grantorpb.GrantorClient, session, prefix, outside string) ([]string, error) {
	var escapes []string
	seq := uint64(0)
	id := func() *grantorpb.RequestID { seq++; return &grantorpb.RequestID{Session: session, Seq: seq} }
	acquire := func(what string, req *grantorpb.AcquireRequest) error {
		req.Id, req.Owner, req.TtlNs = id(), "attacker", int64(10*time.Second)
		resp, err := c.Acquire(ctx, req)
		switch {
		case err == nil:
			escapes = append(escapes, fmt.Sprintf("%s of %s answered: granted %v token %d holder %q", what, req.Lease, resp.Granted, resp.Token, resp.HolderName))
		case status.Code(err) != codes.PermissionDenied && status.Code(err) != codes.InvalidArgument:
			return fmt.Errorf("%s of %s: %w (not a refusal: is c the leader?)", what, req.Lease, err)
		}
		return nil
	}
	for _, a := range []struct {
		what string
		req  *grantorpb.AcquireRequest
	}{
		{"acquire", &grantorpb.AcquireRequest{Lease: outside}},
		{"acquire waiting", &grantorpb.AcquireRequest{Lease: outside, WaitNs: int64(time.Second)}},
		{"semaphore acquire", &grantorpb.AcquireRequest{Lease: outside, Limit: 2}},
		{"election", &grantorpb.AcquireRequest{Lease: outside, Value: "attacker"}},
		{"acquire by a path out of the prefix", &grantorpb.AcquireRequest{Lease: prefix + "../" + outside}},
	} {
		if err := acquire(a.what, a.req); err != nil {
			return escapes, err
		}
	}
	if _, err := c.Proclaim(ctx, &grantorpb.ProclaimRequest{Id: id(), Lease: outside, Token: 1, Value: "attacker"}); status.Code(err) != codes.PermissionDenied {
		escapes = append(escapes, fmt.Sprintf("proclaim of %s answered: %v", outside, err))
	}
	if resp, err := c.CheckToken(ctx, &grantorpb.CheckTokenRequest{Lease: outside, Token: 1}); status.Code(err) != codes.PermissionDenied {
		escapes = append(escapes, fmt.Sprintf("check_token of %s answered: %v %v", outside, resp, err))
	}
	for _, req := range []*grantorpb.WatchRequest{
		{Add: []string{outside}},
		{Add: []string{outside}, Remove: []string{outside}},
		{Add: []string{prefix + "w", outside}},
	} {
		got, err := watchOnce(ctx, c, req)
		if err != nil {
			return escapes, err
		}
		if k := got[outside]; k != grantorpb.WatchEvent_DENIED {
			escapes = append(escapes, fmt.Sprintf("watch %v: %s got %v, not DENIED", req, outside, k))
		}
	}
	return escapes, nil
}

// watchOnce opens a Watch stream, sends req and returns the kind of the
// first event of each name it added.
func watchOnce(ctx context.Context, c grantorpb.GrantorClient, req *grantorpb.WatchRequest) (map[string]grantorpb.WatchEvent_Kind, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.Watch(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(req); err != nil {
		return nil, err
	}
	got := map[string]grantorpb.WatchEvent_Kind{}
	for len(got) < len(req.Add) {
		ev, err := st.Recv()
		if err != nil {
			return got, fmt.Errorf("watch %v: %w", req, err)
		}
		if _, seen := got[ev.Lease]; !seen {
			got[ev.Lease] = ev.Kind
		}
	}
	return got, nil
}
