package grantor

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/stranger"
)

// testPKI is a cluster CA in a temporary directory.
type testPKI struct {
	t   testing.TB
	dir string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	dir := t.TempDir()
	if err := pki.CreateCA(dir, 0); err != nil {
		t.Fatal(err)
	}
	return &testPKI{t: t, dir: dir}
}

// conf returns a Configurator for a new certificate of role and name.
func (p *testPKI) conf(role, name string) *pki.Configurator {
	p.t.Helper()
	id := pki.Identity{Role: role, Name: name}
	cert, key, err := pki.CreateCert(p.dir, pki.CertRequest{Identity: id, Overwrite: true})
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := pki.NewConfigurator(pki.Files{CA: filepath.Join(p.dir, pki.CAFile), Cert: cert, Key: key})
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// client dials addr with creds.
func dialWith(t testing.TB, addr string, creds credentials.TransportCredentials) grantorpb.GrantorClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grantorpb.NewGrantorClient(conn)
}

// lineLog is a slog handler that keeps every line as text, for tests
// that look for a log line; wait blocks until one contains all of subs.
type lineLog struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	lines   []string
	changed chan struct{}
}

func newLineLog() *lineLog { return &lineLog{changed: make(chan struct{})} }

func (l *lineLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(lineWriter{l}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type lineWriter struct{ l *lineLog }

func (w lineWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	w.l.lines = append(w.l.lines, strings.TrimRight(string(p), "\n"))
	close(w.l.changed)
	w.l.changed = make(chan struct{})
	return len(p), nil
}

func (l *lineLog) find(subs ...string) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if containsAll(line, subs) {
			return line, true
		}
	}
	return "", false
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func (l *lineLog) wait(t *testing.T, subs ...string) string {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		l.mu.Lock()
		ch := l.changed
		l.mu.Unlock()
		if line, ok := l.find(subs...); ok {
			return line
		}
		select {
		case <-ch:
		case <-timer.C:
			t.Fatalf("timed out waiting for a log line with %q", subs)
		}
	}
}

// Every RPC of the service has an entry in callRoles, and callRoles
// names no RPC the service does not have: a new RPC without an entry
// fails here (and is refused to everyone until it has one).
func TestEveryRPCHasRoles(t *testing.T) {
	var methods []string
	desc := grantorpb.Grantor_ServiceDesc
	for _, m := range desc.Methods {
		methods = append(methods, "/"+desc.ServiceName+"/"+m.MethodName)
	}
	for _, s := range desc.Streams {
		methods = append(methods, "/"+desc.ServiceName+"/"+s.StreamName)
	}
	for _, m := range methods {
		if len(callRoles[m]) == 0 {
			t.Errorf("RPC %s has no entry in callRoles: say which roles may call it", m)
		}
	}
	for m := range callRoles {
		if !slices.Contains(methods, m) {
			t.Errorf("callRoles names %s, which the service does not have", m)
		}
	}
}

// tlsNode starts a single TLS node n1 under p, its audit trail in audit.
func tlsNode(t *testing.T, p *testPKI, audit *lineLog) *running {
	return tlsNodeNamed(t, p, audit, "n1")
}

// tlsNodeNamed starts a single TLS node under p with the grantor
// certificate of name, its audit trail in audit.
func tlsNodeNamed(t *testing.T, p *testPKI, audit *lineLog, name string) *running {
	cfg := fastConfig(t, t.TempDir())
	cfg.NodeID = name
	cfg.TLS = p.conf(pki.RoleGrantor, name)
	if audit != nil {
		cfg.Audit = audit.logger()
	}
	return start(t, cfg, true)
}

// Each role may make the calls callRoles gives it, over real TLS, and is
// refused the others with PermissionDenied and an audit line naming the
// role and name.
func TestRPCRolesOverTLS(t *testing.T) {
	p := newTestPKI(t)
	audit := newLineLog()
	n := tlsNode(t, p, audit)
	tokens := map[string]uint64{}
	// Each call gets a client of the node, its caller's name, and a way to
	// a client of a fresh node of its own (for Leave, which stops it).
	type call = func(c grantorpb.GrantorClient, who string, fresh func() grantorpb.GrantorClient) error
	calls := map[string]call{
		grantorpb.Grantor_Acquire_FullMethodName: func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
			a, err := c.Acquire(tctx(t), acqReq("s-"+who, 1, "roles/"+who))
			if err == nil {
				tokens[who] = a.Token
			}
			return err
		},
		grantorpb.Grantor_AcquireShared_FullMethodName: func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
			_, err := c.AcquireShared(tctx(t), acqReq("s-"+who, 7, "roles-shared/"+who))
			return err
		},
		grantorpb.Grantor_Release_FullMethodName: func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
			_, err := c.Release(tctx(t), &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: "s-" + who, Seq: 2}, Lease: "roles/" + who, Owner: "o", Token: tokens[who]})
			return err
		},
		grantorpb.Grantor_KeepAlive_FullMethodName: func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
			ka, err := c.KeepAlive(tctx(t))
			if err != nil {
				return err
			}
			if err := ka.Send(&grantorpb.KeepAliveRequest{Session: "s-" + who, Batch: 1}); err != nil && err != io.EOF {
				return err
			}
			_, err = ka.Recv()
			return err
		},
		grantorpb.Grantor_Members_FullMethodName: func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
			_, err := c.Members(tctx(t), &grantorpb.MembersRequest{})
			return err
		},
		grantorpb.Grantor_RemoveServer_FullMethodName: func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
			// A grantor certificate removes only its own server
			// (TestGrantorCertificateRemovesOnlyItself): who is none.
			_, err := c.RemoveServer(tctx(t), &grantorpb.RemoveServerRequest{NodeId: who})
			if status.Code(err) == codes.NotFound {
				return nil // allowed, and answered: there is no such server
			}
			return err
		},
	}
	calls[grantorpb.Grantor_RegisterNode_FullMethodName] = func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
		_, err := c.RegisterNode(tctx(t), &grantorpb.RegisterNodeRequest{NodeId: who, RpcAddr: "127.0.0.1:1", MaxCommand: 1})
		if status.Code(err) == codes.NotFound {
			return nil // allowed, and answered: who is not in the configuration
		}
		return err
	}
	calls[grantorpb.Grantor_Proclaim_FullMethodName] = func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
		_, err := c.Proclaim(tctx(t), &grantorpb.ProclaimRequest{Id: &grantorpb.RequestID{Session: "s-" + who, Seq: 3}, Lease: "roles/" + who, Owner: "o", Token: tokens[who], Value: who})
		return err
	}
	calls[grantorpb.Grantor_Watch_FullMethodName] = func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
		ws, err := c.Watch(tctx(t))
		if err != nil {
			return err
		}
		defer ws.CloseSend()
		if err := ws.Send(&grantorpb.WatchRequest{Add: []string{"roles/" + who}}); err != nil && err != io.EOF {
			return err
		}
		_, err = ws.Recv()
		return err
	}
	calls[grantorpb.Grantor_CheckToken_FullMethodName] = func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
		_, err := c.CheckToken(tctx(t), &grantorpb.CheckTokenRequest{Lease: "roles/" + who, Token: 1})
		return err
	}
	calls[grantorpb.Grantor_Leases_FullMethodName] = func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
		_, err := c.Leases(tctx(t), &grantorpb.LeasesRequest{Prefix: "roles/"})
		return err
	}
	calls[grantorpb.Grantor_Revoke_FullMethodName] = func(c grantorpb.GrantorClient, who string, _ func() grantorpb.GrantorClient) error {
		_, err := c.Revoke(tctx(t), &grantorpb.RevokeRequest{Lease: "roles/" + who})
		if status.Code(err) == codes.NotFound {
			return nil // allowed, and answered: released above
		}
		return err
	}
	calls[grantorpb.Grantor_Leave_FullMethodName] = func(_ grantorpb.GrantorClient, _ string, fresh func() grantorpb.GrantorClient) error {
		_, err := fresh().Leave(tctx(t), &grantorpb.LeaveRequest{})
		return err
	}
	if len(calls) != len(callRoles) {
		t.Fatalf("the test covers %d RPCs, callRoles has %d", len(calls), len(callRoles))
	}
	for _, r := range []Role{RoleGrantor, RoleSidecar, RoleOperator} {
		name := r.String() + "-1"
		creds := p.conf(r.String(), name).ClientCredentials()
		c := dialWith(t, n.RPCAddr(), creds)
		// Leave's fresh node has the caller's name: a grantor
		// certificate makes only its own grantor leave.
		fresh := func() grantorpb.GrantorClient { return dialWith(t, tlsNodeNamed(t, p, audit, name).RPCAddr(), creds) }
		for _, method := range []string{grantorpb.Grantor_Acquire_FullMethodName, grantorpb.Grantor_Proclaim_FullMethodName,
			grantorpb.Grantor_Watch_FullMethodName, grantorpb.Grantor_CheckToken_FullMethodName, grantorpb.Grantor_Release_FullMethodName,
			grantorpb.Grantor_KeepAlive_FullMethodName, grantorpb.Grantor_Members_FullMethodName, grantorpb.Grantor_RemoveServer_FullMethodName,
			grantorpb.Grantor_RegisterNode_FullMethodName, grantorpb.Grantor_Leases_FullMethodName, grantorpb.Grantor_Revoke_FullMethodName,
			grantorpb.Grantor_Leave_FullMethodName} {
			call := calls[method]
			short := method[strings.LastIndexByte(method, '/')+1:]
			t.Run(r.String()+"/"+short, func(t *testing.T) {
				err := call(c, name, fresh)
				allowed := slices.Contains(callRoles[method], r)
				switch {
				case allowed && err != nil:
					t.Fatalf("refused: %v", err)
				case !allowed && status.Code(err) != codes.PermissionDenied:
					t.Fatalf("err %v, want PermissionDenied", err)
				case !allowed:
					audit.wait(t, "event=refused", "role="+r.String(), "name="+name, "call="+short)
				}
			})
		}
	}
	// The grants above are audited with who made them.
	audit.wait(t, "event=grant", "role=sidecar", "name=sidecar-1", "lease=roles/sidecar-1")
	audit.wait(t, "event=release", "role=operator", "name=operator-1", "lease=roles/operator-1", "released=true")
	audit.wait(t, "event=proclaim", "role=sidecar", "name=sidecar-1", "lease=roles/sidecar-1", "proclaimed=true")
}

// A gRPC client that is not from the cluster gets nothing: no TLS at all,
// no certificate, a certificate of another CA.
func TestGRPCRefusesStrangers(t *testing.T) {
	p := newTestPKI(t)
	n := tlsNode(t, p, nil)
	other := newTestPKI(t)
	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
	}{
		{name: "plain text", creds: insecure.NewCredentials()},
		{name: "no client certificate", creds: credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})},
		{name: "another CA's sidecar", creds: other.conf(pki.RoleSidecar, "h1").ClientCredentials()},
		{name: "another CA's grantor", creds: other.conf(pki.RoleGrantor, "n1").ClientCredentials()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialWith(t, n.RPCAddr(), tc.creds)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := c.Acquire(ctx, acqReq("stranger", 1, "x"))
			if code := status.Code(err); code != codes.Unavailable {
				t.Fatalf("Acquire: %v, want Unavailable (no connection)", err)
			}
		})
	}
	// The cluster's own sidecar still gets through.
	c := dialWith(t, n.RPCAddr(), p.conf(pki.RoleSidecar, "h1").ClientCredentials())
	if a := mustAcquire(t, c, acqReq("s1", 1, "x")); !a.Granted {
		t.Fatalf("acquire by a sidecar of the cluster: %v", a)
	}
}

// Raft over TLS: a three-node cluster replicates, and nothing but a
// grantor certificate speaking for its own name reaches raft. Forged
// AppendEntries (a huge term, which would depose the leader; an entry no
// grantor can decode, which would stop a follower for good) are refused
// on every path, and the cluster goes on serving the lease it held.
func TestRaftOverTLSRefusesStrangers(t *testing.T) {
	p := newTestPKI(t)
	other := newTestPKI(t)
	audits := make([]*lineLog, 3)
	i := 0
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.TLS = p.conf(pki.RoleGrantor, cfg.NodeID)
		audits[i] = newLineLog()
		cfg.Audit = audits[i].logger()
		i++
	})
	li := c.leader()
	l := c.nodes[li]
	side := dialWith(t, l.RPCAddr(), p.conf(pki.RoleSidecar, "h1").ClientCredentials())
	held := mustAcquire(t, side, acqReq("s1", 1, "jobs/held"))
	if !held.Granted {
		t.Fatalf("acquire: %v", held)
	}
	fi := (li + 1) % 3
	f := c.nodes[fi]
	// Replicated to the follower over TLS.
	waitRaft(t, "the grant replicated", func() bool { return f.fsm.leaseCount() == 1 }, l, f)
	term := l.raft.CurrentTerm()

	clientTLS := func(c *pki.Configurator) *tls.Config {
		return c.ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}})
	}
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		claims string // the server ID the RPC headers speak for
		why    string // in the refusal's audit line
	}{
		{name: "plain TCP", cfg: nil, claims: "n2", why: "TLS handshake"},
		{name: "no certificate", cfg: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13, NextProtos: []string{pki.ALPNRaft}}, claims: "n2", why: "TLS handshake"},
		{name: "sidecar certificate", cfg: clientTLS(p.conf(pki.RoleSidecar, "n2")), claims: "n2", why: "a grantor certificate is needed"},
		{name: "operator certificate", cfg: clientTLS(p.conf(pki.RoleOperator, "n2")), claims: "n2", why: "a grantor certificate is needed"},
		{name: "another CA's grantor", cfg: clientTLS(other.conf(pki.RoleGrantor, "n2")), claims: "n2", why: "TLS handshake"},
		{name: "grantor speaking for another", cfg: clientTLS(p.conf(pki.RoleGrantor, "n9")), claims: "n2", why: `but the connection's certificate is grantor/n9`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := stranger.Raft(t, tc.cfg)
			hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(tc.claims), Addr: []byte(tr.LocalAddr())}
			// At the leader: a term far ahead deposes a leader that takes it.
			var resp raft.AppendEntriesResponse
			err := tr.AppendEntries(raft.ServerID(l.cfg.NodeID), raft.ServerAddress(l.RaftAddr()), &raft.AppendEntriesRequest{
				RPCHeader: hdr, Term: term + 1000,
			}, &resp)
			if err == nil {
				t.Fatalf("AppendEntries with a huge term answered %+v, want it refused", resp)
			}
			audits[li].wait(t, "event=refused_raft", tc.why)
			// At a follower: an entry no grantor can decode, in the
			// current term, right after its last entry.
			last := f.raft.LastIndex()
			err = tr.AppendEntries(raft.ServerID(f.cfg.NodeID), raft.ServerAddress(f.RaftAddr()), &raft.AppendEntriesRequest{
				RPCHeader: hdr, Term: f.raft.CurrentTerm(), PrevLogEntry: last, PrevLogTerm: f.raft.CurrentTerm(),
				Entries:           []*raft.Log{{Index: last + 1, Term: f.raft.CurrentTerm(), Type: raft.LogCommand, Data: []byte{0xFF}}},
				LeaderCommitIndex: last + 1,
			}, &resp)
			if err == nil {
				t.Fatalf("AppendEntries with an undecodable entry answered %+v, want it refused", resp)
			}
			audits[fi].wait(t, "event=refused_raft", tc.why)
			for idx := uint64(1); idx <= f.raft.LastIndex(); idx++ {
				var e raft.Log
				if f.wal.GetLog(idx, &e) == nil && bytes.Equal(e.Data, []byte{0xFF}) {
					t.Fatalf("the follower's log holds the forged entry at %d", idx)
				}
			}
		})
	}
	// Nothing changed: no node took the forged term (a busy machine may
	// still see an election of its own), the lease is still held under
	// its token, and the cluster still grants.
	for _, n := range c.nodes {
		if got := n.raft.CurrentTerm(); got >= term+1000 {
			t.Fatalf("%s is in term %d: it took the forged term", n.cfg.NodeID, got)
		}
	}
	sideCreds := p.conf(pki.RoleSidecar, "h1").ClientCredentials()
	if again := c.acquireAtLeader(sideCreds, acqReq("s2", 1, "jobs/held")); again.Granted || again.Token != held.Token {
		t.Fatalf("the held lease: %v, want held under token %d", again, held.Token)
	}
	if fresh := c.acquireAtLeader(sideCreds, acqReq("s2", 2, "jobs/other")); !fresh.Granted {
		t.Fatalf("a new acquire: %v", fresh)
	}
}

// acquireAtLeader sends req to the node in office, with creds, and again
// (the same request id: it is granted once) if leadership moves meanwhile.
func (c *testCluster) acquireAtLeader(creds credentials.TransportCredentials, req *grantorpb.AcquireRequest) *grantorpb.AcquireResponse {
	c.t.Helper()
	for attempt := 1; ; attempt++ {
		resp, err := dialWith(c.t, c.nodes[c.leader()].RPCAddr(), creds).Acquire(tctx(c.t), req)
		if err == nil {
			return resp
		}
		if status.Code(err) != codes.FailedPrecondition || attempt == 20 {
			c.t.Fatalf("Acquire %v: %v", req, err)
		}
	}
}

// A gossip member that claims to be a grantor but whose raft address does
// not present a grantor certificate with its name is never added to raft.
func TestAdmissionNeedsGrantorCertificate(t *testing.T) {
	p := newTestPKI(t)
	audit := newLineLog()
	cfg := gossipConfig(t, "g1", 1, "")
	cfg.TLS = p.conf(pki.RoleGrantor, "g1")
	cfg.Audit = audit.logger()
	cfg.ReconcileInterval = 200 * time.Millisecond
	g1 := start(t, cfg, true)

	// Two impostors' raft addresses: one serves a grantor certificate
	// with another name, one no TLS at all.
	serveTLS := func(c *pki.Configurator) string {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", c.ServerConfig(pki.ALPNRaft, pki.Peer{}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				go func() { conn.(*tls.Conn).Handshake(); conn.Close() }()
			}
		}()
		return ln.Addr().String()
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	go func() {
		for {
			conn, err := plain.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	impostors := map[string]string{"g8": serveTLS(p.conf(pki.RoleGrantor, "g7")), "g9": plain.Addr().String()}
	for id, raftAddr := range impostors {
		m, err := gossip.Start(tctx(t), gossip.Config{
			Name: id, BindAddr: "127.0.0.1:0", Join: []string{g1.GossipAddr()}, Timing: gossip.LoopbackTiming(),
			Meta: gossip.Meta{Role: gossip.RoleGrantor, NodeID: id, RaftAddr: raftAddr, RPCAddr: raftAddr, Voter: true, Version: "test"},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Shutdown() })
	}
	for id := range impostors {
		audit.wait(t, "event=refused_raft", fmt.Sprintf(`claims grantor \"%s\"`, id))
	}
	if got := servers(g1); !slices.Equal(got, []string{"g1=Voter"}) {
		t.Fatalf("raft configuration %v, want g1 alone", got)
	}
}

// A dev node opens no port: raft in memory, gRPC on a Unix socket only
// its user may open, in a directory no one else may enter.
func TestNodeInMemoryRaftOnUnixSocket(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "private", "grpc.sock")
	cfg := fastConfig(t, dir)
	cfg.InMemoryRaft = true
	cfg.RPCAddr = "unix:" + sock
	n := start(t, cfg, true)
	if a := mustAcquire(t, n.client, acqReq("s1", 1, "dev/lease")); !a.Granted {
		t.Fatalf("acquire over the socket: %v", a)
	}
	if n.RPCAddr() != "unix:"+sock || !strings.HasPrefix(n.RaftAddr(), "inmem:") {
		t.Errorf("addresses: rpc %s raft %s", n.RPCAddr(), n.RaftAddr())
	}
	for path, want := range map[string]os.FileMode{sock: 0o600, filepath.Dir(sock): 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), want)
		}
	}

	// A socket directory others may enter is refused.
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg = fastConfig(t, t.TempDir())
	cfg.InMemoryRaft = true
	cfg.RPCAddr = "unix:" + filepath.Join(open, "grpc.sock")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "open to other users") {
		t.Fatalf("New with a socket in a 0755 directory: %v, want it refused", err)
	}
}

// With TLS, only a grantor registers, and only itself: an operator
// certificate (review R8-8) or another grantor's naming this node is
// refused and audited, and the registered address stays this node's.
// Without TLS the one insecure identity registers, as grantors do there.
func TestRegisterNodeOnlyByItsGrantor(t *testing.T) {
	p := newTestPKI(t)
	audit := newLineLog()
	n := tlsNode(t, p, audit)
	forged := &grantorpb.RegisterNodeRequest{NodeId: "n1", RpcAddr: "127.0.0.1:9", MaxCommand: 255}
	for _, who := range []struct{ role, name string }{{pki.RoleOperator, "alice"}, {pki.RoleGrantor, "n2"}} {
		c := dialWith(t, n.RPCAddr(), p.conf(who.role, who.name).ClientCredentials())
		if _, err := c.RegisterNode(tctx(t), forged); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s %s registering n1: %v, want PermissionDenied", who.role, who.name, err)
		}
	}
	audit.wait(t, "event=refused", "role=operator", "name=alice", "call=RegisterNode")
	own := &grantorpb.RegisterNodeRequest{NodeId: "n1", RpcAddr: n.RPCAddr(), MaxCommand: uint32(newestCmd)}
	if _, err := dialWith(t, n.RPCAddr(), p.conf(pki.RoleGrantor, "n1").ClientCredentials()).RegisterNode(tctx(t), own); err != nil {
		t.Errorf("n1 registering itself: %v", err)
	}
	if got := n.fsm.nodeAddr("n1"); got != n.RPCAddr() {
		t.Errorf("n1 is registered at %q, want %q", got, n.RPCAddr())
	}

	plain := start(t, fastConfig(t, t.TempDir()), true)
	if _, err := plain.client.RegisterNode(tctx(t), &grantorpb.RegisterNodeRequest{NodeId: plain.cfg.NodeID, RpcAddr: plain.RPCAddr(),
		MaxCommand: uint32(newestCmd)}); err != nil {
		t.Errorf("without TLS: %v", err)
	}
}
