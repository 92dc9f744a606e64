package daemon

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/clockwatch"
	"github.com/leaseside/leaseside/grantor"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/ipc"
)

// startDaemon runs a daemon with cfg on a socket of its own until the test
// ends, and returns it and its socket's path.
func startDaemon(t testing.TB, cfg Config) (*Daemon, string) {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "d.sock")
	ln, err := ipc.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		d.Run(ctx, ln)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return d, sock
}

// daemonClient is a client of a daemon started with cfg, closed when the
// test ends.
func daemonClient(t *testing.T, cfg Config) *ipc.Client {
	t.Helper()
	_, sock := startDaemon(t, cfg)
	c := &ipc.Client{Socket: sock}
	t.Cleanup(func() { c.Close() })
	return c
}

// endingProxy relays to a real grantor. The first Acquire of its lease
// is applied there and its reply lost; before the sidecar's retry, that
// grant ends (its holder's release, sent as the grantor would see it) and
// another session takes the name: chaos finding F4's history, made
// deterministic.
type endingProxy struct {
	*faultProxy
	lease string
	fired atomic.Bool
	// lost is the token of the grant whose reply was lost, other the
	// token of the grant that came after it.
	lost, other atomic.Uint64
}

func (p *endingProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	resp, err := p.up.Acquire(ctx, req)
	if err != nil || req.GetLease() != p.lease || !resp.GetGranted() || !p.fired.CompareAndSwap(false, true) {
		return resp, err
	}
	p.lost.Store(resp.Token)
	// A seq far above the sidecar's own, so the two never meet.
	rel, err := p.up.Release(ctx, &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: req.Id.Session, Seq: 1 << 40},
		Lease: req.Lease, Owner: req.Owner, Token: resp.Token})
	if err != nil || !rel.Released {
		return nil, status.Errorf(codes.Internal, "proxy: ending the grant: %v %v", rel, err)
	}
	other, err := p.up.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "other-host", Seq: 1},
		Lease: req.Lease, Owner: "other", TtlNs: req.TtlNs})
	if err != nil || !other.Granted {
		return nil, status.Errorf(codes.Internal, "proxy: the other session's acquire: %v %v", other, err)
	}
	p.other.Store(other.Token)
	return nil, status.Error(codes.Unavailable, "proxy: reply lost")
}

// Chaos finding F4, through the real grantor and daemon: an acquire that
// was granted while its reply was lost, whose grant then ended and went
// to another session, is answered `lost` naming its own token, never
// `lease_held` (which says nothing happened).
func TestRetriedAcquireWhoseGrantEndedIsLost(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	p := &endingProxy{faultProxy: newFaultProxy(t, startGrantor(t, clockwatch.System, timing), faults{}, 1), lease: "f4"}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	c := daemonClient(t, cfg)

	_, err := c.Acquire(ctxT(t), "f4", ipc.AcquireOptions{TTL: 10 * time.Second})
	if !p.fired.Load() {
		t.Fatalf("the proxy never lost a reply (acquire: %v)", err)
	}
	var ie *ipc.Error
	if !errors.As(err, &ie) {
		t.Fatalf("acquire: %v, want an *ipc.Error", err)
	}
	if ie.Code != ipc.CodeLost {
		t.Fatalf("acquire answered %q (%s), want %q: grant %d was made and ended, and %d holds the name now",
			ie.Code, ie.Message, ipc.CodeLost, p.lost.Load(), p.other.Load())
	}
	if want := "token " + strconv.FormatUint(p.lost.Load(), 10); !strings.Contains(ie.Message, want) {
		t.Fatalf("message %q does not name the grant that ended (%s)", ie.Message, want)
	}
}

// latePeerProxy relays to a real grantor. The first Acquire of its lease
// is applied there, and its reply is held up on the way (a segment a
// partition delayed) while that grant ends at the grantor and the test
// acquires the name for another owner on the same host; then the reply
// arrives.
type latePeerProxy struct {
	*faultProxy
	lease string
	fired atomic.Bool
	// held is closed once the first grant is made and ended; its reply
	// waits for deliver. late is that grant's token.
	held, deliver chan struct{}
	late          atomic.Uint64
}

func (p *latePeerProxy) Acquire(ctx context.Context, req *grantorpb.AcquireRequest) (*grantorpb.AcquireResponse, error) {
	resp, err := p.up.Acquire(ctx, req)
	if err != nil || req.GetLease() != p.lease || !resp.GetGranted() || !p.fired.CompareAndSwap(false, true) {
		return resp, err
	}
	p.late.Store(resp.Token)
	rel, err := p.up.Release(ctx, &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: req.Id.Session, Seq: 1 << 40},
		Lease: req.Lease, Owner: req.Owner, Token: resp.Token})
	if err != nil || !rel.Released {
		return nil, status.Errorf(codes.Internal, "proxy: ending the grant: %v %v", rel, err)
	}
	close(p.held)
	select {
	case <-p.deliver:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return resp, nil
}

// Chaos finding F7, one of its candidate causes: an acquire's reply that
// comes after the grant it names has ended and the name has gone to
// another owner on the same host must not answer with that owner's grant.
// (The daemon took a listed grant with a higher token for this reply's
// own, and told the second owner it held the first one's token, with the
// deadline the first one's t0 gave.) It is answered lost, naming its own
// token, and the other owner's grant stands at the grantor: it renews.
func TestLateReplyIsNotAnotherOwnersGrant(t *testing.T) {
	timing := clockwatch.DefaultTiming()
	p := &latePeerProxy{faultProxy: newFaultProxy(t, startGrantor(t, clockwatch.System, timing), faults{}, 1), lease: "f7",
		held: make(chan struct{}), deliver: make(chan struct{})}
	cfg := DefaultConfig()
	cfg.Grantors = []string{serveGrantorAPI(t, p)}
	cfg.Timing = timing
	_, sock := startDaemon(t, cfg)
	late, other := &ipc.Client{Socket: sock}, &ipc.Client{Socket: sock}
	t.Cleanup(func() { late.Close(); other.Close() })

	first := acquireAsync(ctxT(t), late, "f7", ipc.AcquireOptions{TTL: 10 * time.Second})
	select {
	case <-p.held:
	case a := <-first:
		t.Fatalf("the first acquire returned (%v, %v) before the proxy held its reply", a.l, a.err)
	case <-ctxT(t).Done():
		t.Fatal("the first acquire never reached the grantor")
	}
	l, err := other.Acquire(ctxT(t), "f7", ipc.AcquireOptions{TTL: 10 * time.Second})
	if err != nil {
		t.Fatalf("the other owner's acquire, with the name free at the grantor: %v", err)
	}
	close(p.deliver)
	a := <-first
	var ie *ipc.Error
	if !errors.As(a.err, &ie) || ie.Code != ipc.CodeLost {
		tok := ""
		if a.l != nil {
			tok = a.l.Token
		}
		t.Fatalf("the late reply's acquire: grant token %q, err %v; want lost (its grant %d ended, and the other owner holds %s)", tok, a.err, p.late.Load(), l.Token)
	}
	if want := "token " + strconv.FormatUint(p.late.Load(), 10); !strings.Contains(ie.Message, want) {
		t.Fatalf("message %q does not name the grant that ended (%s)", ie.Message, want)
	}
	g, err := other.RenewToken(ctxT(t), "f7", l.Token)
	if err != nil || g.Token != l.Token {
		t.Fatalf("the other owner's renewal after the late reply: %+v, %v", g, err)
	}
}

// A lease_held refusal names the holder's token and its sidecar's name,
// as the grantor reports them from the holder's certificate
// (Error.Holder, which the CLI prints). Without TLS every caller is the
// identity "insecure", which names no host: the refusal leaves Holder
// empty then.
func TestLeaseHeldNamesTheHolder(t *testing.T) {
	for _, tt := range []struct {
		name   string
		tls    bool
		holder string
	}{
		{name: "mutual TLS", tls: true, holder: "h2"},
		{name: "clear text", holder: ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			timing := clockwatch.DefaultTiming()
			cfg := DefaultConfig()
			cfg.Timing = timing
			other := insecure.NewCredentials()
			var ca string
			if tt.tls {
				ca = newCA(t)
				other = sidecarCert(t, ca, "h2").ClientCredentials()
				cfg.Credentials = sidecarCert(t, ca, "h1").ClientCredentials()
			}
			addr := startGrantorWith(t, clockwatch.System, timing, func(g *grantor.Config) {
				if tt.tls {
					g.TLS = certOf(t, ca, pki.RoleGrantor, g.NodeID)
				}
			})
			cfg.Grantors = []string{addr}
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(other))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			held, err := grantorpb.NewGrantorClient(cc).Acquire(ctxT(t), &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "other-host", Seq: 1},
				Lease: "busy", Owner: "other", TtlNs: int64(10 * time.Second)})
			if err != nil || !held.Granted {
				t.Fatalf("the other host's acquire: %v %v", held, err)
			}
			c := daemonClient(t, cfg)
			_, err = c.Acquire(ctxT(t), "busy", ipc.AcquireOptions{TTL: 10 * time.Second})
			var ie *ipc.Error
			if !errors.As(err, &ie) || ie.Code != ipc.CodeLeaseHeld {
				t.Fatalf("acquire: %v, want lease_held", err)
			}
			if ie.Holder != tt.holder || ie.HolderToken != strconv.FormatUint(held.Token, 10) {
				t.Fatalf("refusal names holder %q token %q, want %q and %d", ie.Holder, ie.HolderToken, tt.holder, held.Token)
			}
		})
	}
}

// newCA makes a cluster CA in a temporary directory.
func newCA(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := pki.CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

// certOf is a certificate of the CA in dir for role and name.
func certOf(t *testing.T, dir, role, name string) *pki.Configurator {
	t.Helper()
	cert, key, err := pki.CreateCert(dir, pki.CertRequest{Identity: pki.Identity{Role: role, Name: name}, Overwrite: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := pki.NewConfigurator(pki.Files{CA: filepath.Join(dir, pki.CAFile), Cert: cert, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sidecarCert(t *testing.T, dir, name string) *pki.Configurator {
	t.Helper()
	return certOf(t, dir, pki.RoleSidecar, name)
}
