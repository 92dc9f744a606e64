package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/grantor/pki"
	"github.com/leaseside/leaseside/internal/stranger"
	"github.com/leaseside/leaseside/ipc"
)

// The trust boundary (issue 8, SECURITY.md) on real processes: grantors
// and sidecars of the built binary with the cluster's certificates and
// gossip key made by `leaseside tls`, attacked as a stranger would.

// clusterPKI is a cluster CA directory and a gossip key file, made with
// the binary (`leaseside tls ...`).
type clusterPKI struct {
	t   *testing.T
	dir string
	key string // the gossip key file
}

func newClusterPKI(t *testing.T) *clusterPKI {
	t.Helper()
	p := &clusterPKI{t: t, dir: t.TempDir()}
	p.run("tls", "ca", "create", "--dir", p.dir)
	p.key = filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(p.key, []byte(p.run("tls", "gossip-key")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// run runs the binary and returns its stdout; it fails the test unless
// it exits 0.
func (p *clusterPKI) run(args ...string) string {
	p.t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		p.t.Fatalf("leaseside %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// cert makes (or with force, remakes) the certificate of role and name and
// returns its --tls-* flags.
func (p *clusterPKI) cert(role, name string, force bool) []string {
	p.t.Helper()
	args := []string{"tls", "cert", "create", "--dir", p.dir, "--" + role, name}
	if force {
		args = append(args, "--force")
	}
	p.run(args...)
	return tlsArgs(p.dir, role, name)
}

// creds are gRPC client credentials of role/name's certificate, made
// first if needed.
func (p *clusterPKI) creds(role, name string) credentials.TransportCredentials {
	p.t.Helper()
	if _, err := os.Stat(filepath.Join(p.dir, role+"-"+name+".pem")); err != nil {
		p.cert(role, name, false)
	}
	return p.configurator(role, name).ClientCredentials()
}

func (p *clusterPKI) configurator(role, name string) *pki.Configurator {
	p.t.Helper()
	c, err := pki.NewConfigurator(pki.Files{CA: filepath.Join(p.dir, "ca.pem"),
		Cert: filepath.Join(p.dir, role+"-"+name+".pem"), Key: filepath.Join(p.dir, role+"-"+name+"-key.pem")})
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// newTLSCluster lays out three grantors on loopback with TLS and the
// gossip key of p, starts them and waits until they are ready.
func newTLSCluster(t *testing.T, p *clusterPKI) *cluster {
	t.Helper()
	c := newLoopbackCluster(t, 3)
	for _, n := range c.nodes {
		p.cert("grantor", n.id, false)
		n.tlsDir, n.keyFile = p.dir, p.key
	}
	c.startAll()
	return c
}

// grpcClient dials addr with creds.
func grpcClient(t *testing.T, addr string, creds credentials.TransportCredentials) grantorpb.GrantorClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return grantorpb.NewGrantorClient(conn)
}

// grpcDialer returns a dial for attack.Victim: a client of any address
// with creds, its connection closed when the test ends (it may be called
// from another goroutine than the test's).
func grpcDialer(t *testing.T, creds credentials.TransportCredentials) func(addr string) (grantorpb.GrantorClient, error) {
	var (
		mu    sync.Mutex
		conns []*grpc.ClientConn
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return func(addr string) (grantorpb.GrantorClient, error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		conns = append(conns, conn)
		mu.Unlock()
		return grantorpb.NewGrantorClient(conn), nil
	}
}

// auditRE reads the session, owner and token of a grant's audit line.
var auditRE = regexp.MustCompile(`event=grant role=sidecar name=(\S+) lease=(\S+) token=(\d+) session=(\S+) owner=(\S+)`)

// waitOwnedSessions waits until the grantors record with every grant the
// identity that made it. Right after a cluster starts, its leader writes
// the older form of an acquire, without the identity, until every grantor
// has registered the newest command type it applies (grantor/versions.go),
// and a session opened meanwhile belongs to no one until its sidecar's
// next identified request. Sidecar s (named name) takes and gives back
// throwaway leases until another sidecar's probe (creds) names s as their
// holder: each round is the event, no time is waited.
func waitOwnedSessions(t *testing.T, s *sidecar, name string, c *cluster, creds credentials.TransportCredentials) {
	t.Helper()
	ctx := tctx(t)
	sc := s.client(t)
	var probes []grantorpb.GrantorClient
	for _, n := range c.nodes {
		probes = append(probes, grpcClient(t, n.rpcAddr(), creds))
	}
	for i := 1; ; i++ {
		if ctx.Err() != nil {
			t.Fatalf("no grant named its holder's identity in %d rounds", i)
		}
		lease := fmt.Sprintf("trust/warm-up-%d", i)
		l, err := sc.Acquire(ctx, lease, ipc.AcquireOptions{TTL: 5 * time.Second})
		if err != nil {
			t.Fatalf("warm-up acquire: %v", err)
		}
		named := false
		for _, pc := range probes {
			r, err := pc.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "warm-up-probe", Seq: uint64(i)},
				Lease: lease, Owner: "o", TtlNs: int64(5 * time.Second)})
			if err == nil { // the leader answered
				named = !r.Granted && r.HolderName == name
				break
			}
		}
		if err := sc.ReleaseToken(ctx, lease, l.Token); err != nil {
			t.Fatalf("warm-up release: %v", err)
		}
		if named {
			t.Logf("grants name their holder from round %d on", i)
			return
		}
	}
}

// forgedTerm is the term of the forged AppendEntries. A grantor that took
// it would start its next election in term forgedTerm+1, and log it.
const forgedTerm = 1 << 40

// noForgedTerm fails the test if a grantor's log shows the forged term.
func noForgedTerm(t *testing.T, c *cluster) {
	t.Helper()
	prefix := "term=" + strconv.FormatUint(forgedTerm, 10)[:10]
	for _, n := range c.nodes {
		for _, l := range n.proc.out.all() {
			if strings.Contains(l.v, prefix) {
				t.Fatalf("grantor %s took the forged term: %s", n.id, l.v)
			}
		}
	}
}

// Every stranger is refused on real processes (3 grantors, 2 sidecars,
// TLS and a gossip key), and afterwards no grantor took the forged term,
// the cluster still serves and no lease was lost: a gRPC client without a
// certificate or with one of another CA; a sidecar certificate calling
// RemoveServer or used as a raft peer; forged AppendEntries (a huge term at the leader, an
// undecodable entry at a follower) without a grantor certificate; another
// sidecar releasing and renewing under the holder's session with the
// holder's own ids (the attack of issue 8: probe, release as the holder,
// acquire); a gossip member without the key (a sidecar, and a grantor
// with a grantor certificate: it never becomes a member); a grantor on a
// non-loopback address without TLS, joining the cluster (exit 2).
func TestTrustStrangersRefused(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newTLSCluster(t, p)
	a := startSidecar(t, "sidecar s1 (gossip)", nil, append(p.cert("sidecar", "s1", false), "--join", c.gossipAddrs(), "--gossip-key-file", p.key)...)
	b := startSidecar(t, "sidecar s2 (--grantors)", nil, append(p.cert("sidecar", "s2", false), "--grantors", c.rpcAddrs())...)
	ctx := tctx(t)
	waitOwnedSessions(t, a, "s1", c, p.creds("sidecar", "s2"))
	const name = "trust/held"
	held, err := a.client(t).Acquire(ctx, name, ipc.AcquireOptions{TTL: 6 * time.Second})
	if err != nil {
		t.Fatalf("acquire on s1: %v", err)
	}
	leader := c.currentLeader()
	l := c.nodes[leader.node]
	f := c.nodes[c.others(leader.node)[0]]
	// The grant is audited, with who made it; the attack below uses the
	// holder's session and owner, read from there.
	_, grantLine := l.proc.waitLine(t, 0, "event=grant", "lease="+name)
	m := auditRE.FindStringSubmatch(grantLine.v)
	if m == nil || m[1] != "s1" || m[3] != held.Token {
		t.Fatalf("grant audit line %q: want sidecar s1's grant of token %s", grantLine.v, held.Token)
	}
	session, owner := m[4], m[5]
	token, _ := strconv.ParseUint(held.Token, 10, 64)
	marks := c.marks()

	t.Run("members names a sidecar by its certificate", func(t *testing.T) {
		// Refusals and audit lines name s1; so does members (issue 24:
		// it used to show the host name and a random suffix).
		ms, _, err := a.client(t).Members(ctx)
		if err != nil {
			t.Fatalf("members: %v", err)
		}
		var names []string
		for _, m := range ms {
			if m.Role == "sidecar" && strings.HasPrefix(m.Name, "s1-") {
				return
			}
			names = append(names, m.Role+"/"+m.Name)
		}
		t.Fatalf("members lists %q: no sidecar named s1-XXXX", names)
	})

	t.Run("gRPC without a certificate or from another CA", func(t *testing.T) {
		other := newClusterPKI(t)
		for what, creds := range map[string]credentials.TransportCredentials{
			"plain text":        insecure.NewCredentials(),
			"no certificate":    credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13}),
			"another CA's cert": other.creds("sidecar", "s1"),
		} {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := grpcClient(t, l.rpcAddr(), creds).Acquire(ctx, &grantorpb.AcquireRequest{
				Id: &grantorpb.RequestID{Session: "stranger", Seq: 1}, Lease: name, Owner: "o", TtlNs: int64(5 * time.Second)})
			cancel()
			if status.Code(err) != codes.Unavailable {
				t.Errorf("%s: Acquire: %v, want Unavailable (no connection)", what, err)
			}
		}
	})

	t.Run("a sidecar certificate calling RemoveServer", func(t *testing.T) {
		_, err := grpcClient(t, l.rpcAddr(), p.creds("sidecar", "s2")).RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: f.id})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("RemoveServer with a sidecar certificate: %v, want PermissionDenied", err)
		}
		l.proc.waitLine(t, marks[leader.node], "event=refused", "role=sidecar", "name=s2", "call=RemoveServer")
	})

	t.Run("raft without a grantor certificate", func(t *testing.T) {
		side := p.configurator("sidecar", "s2").ClientConfig(pki.ALPNRaft, pki.Peer{Roles: []string{pki.RoleGrantor}})
		for what, cfg := range map[string]*tls.Config{"plain TCP": nil, "a sidecar certificate": side} {
			tr := stranger.Raft(t, cfg)
			hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte(f.id), Addr: []byte(tr.LocalAddr())}
			var resp raft.AppendEntriesResponse
			// A huge term would depose the leader.
			if err := tr.AppendEntries(raft.ServerID(l.id), raft.ServerAddress(l.raftAddr()),
				&raft.AppendEntriesRequest{RPCHeader: hdr, Term: forgedTerm}, &resp); err == nil {
				t.Errorf("%s: AppendEntries with a huge term answered %+v", what, resp)
			}
			// An entry no grantor can decode would stop a follower.
			if err := tr.AppendEntries(raft.ServerID(f.id), raft.ServerAddress(f.raftAddr()), &raft.AppendEntriesRequest{
				RPCHeader: hdr, Term: forgedTerm, Entries: []*raft.Log{{Index: 1 << 30, Term: forgedTerm, Type: raft.LogCommand, Data: []byte{0xFF}}},
				LeaderCommitIndex: 1 << 30,
			}, &resp); err == nil {
				t.Errorf("%s: AppendEntries with an undecodable entry answered %+v", what, resp)
			}
		}
		l.proc.waitLine(t, marks[leader.node], "event=refused_raft", "TLS handshake")
		l.proc.waitLine(t, marks[leader.node], "event=refused_raft", "a grantor certificate is needed")
		f.proc.waitLine(t, marks[c.others(leader.node)[0]], "event=refused_raft")
	})

	t.Run("another sidecar's session", func(t *testing.T) {
		s2 := grpcClient(t, l.rpcAddr(), p.creds("sidecar", "s2"))
		// Probe: the refusal names the holder's token and sidecar, not
		// its session or owner.
		probe, err := s2.Acquire(ctx, &grantorpb.AcquireRequest{Id: &grantorpb.RequestID{Session: "s2-own", Seq: 1},
			Lease: name, Owner: "o", TtlNs: int64(5 * time.Second)})
		if err != nil || probe.Granted || probe.Token != token || probe.HolderName != "s1" {
			t.Fatalf("probe: %v %v, want refused, naming token %d and holder s1", probe, err, token)
		}
		if strings.Contains(probe.String(), session) || strings.Contains(probe.String(), owner) {
			t.Fatalf("the refused acquire reveals the holder's session or owner: %v", probe)
		}
		// Release as the holder, with its own session, owner and token
		// (read here from the grantor's audit trail, the strongest case).
		_, err = s2.Release(ctx, &grantorpb.ReleaseRequest{Id: &grantorpb.RequestID{Session: session, Seq: 1 << 20},
			Lease: name, Owner: owner, Token: token})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("Release under s1's session with s2's certificate: %v, want PermissionDenied", err)
		}
		ka, err := s2.KeepAlive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ka.Send(&grantorpb.KeepAliveRequest{Session: session, Batch: 1, Leases: []*grantorpb.LeaseRef{{Lease: name, Token: token, TtlNs: int64(6 * time.Second)}}})
		if _, err := ka.Recv(); status.Code(err) != codes.PermissionDenied {
			t.Fatalf("KeepAlive under s1's session with s2's certificate: %v, want PermissionDenied", err)
		}
		// And the acquire that would have followed gets nothing.
		if g, err := b.client(t).Acquire(ctx, name, ipc.AcquireOptions{TTL: 5 * time.Second}); !errors.Is(err, ipc.ErrLeaseHeld) {
			t.Fatalf("acquire on s2 after the attack: %v %v, want held", g, err)
		}
	})

	t.Run("a gossip member without the key", func(t *testing.T) {
		seed := c.nodes[0].proc
		mark := seed.out.mark()
		out, err := exec.Command(bin, "daemon", "--socket", tempSocket(t), "--join", c.gossipAddrs(0)).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(string(out), "gossip key is wrong or missing") {
			t.Fatalf("a sidecar without the gossip key: %v, want refused for the key\n%s", err, out)
		}
		// The seed grantor itself refused it (not only the stranger's own
		// side), and says why. (Its next lines of the kind may be held
		// back: grantor/gossip's log limit.)
		seed.waitLine(t, mark, "remote state is not encrypted", "the gossip key is wrong or missing")
		// A grantor with a grantor certificate of the cluster's CA but
		// without the key: the key alone keeps it out of gossip, and so
		// out of raft.
		ports := freeLoopbackPorts(t, 3)
		addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
		rctx, cancel := context.WithTimeout(ctx, timeout) // killed if it does start
		out, err = exec.CommandContext(rctx, bin, append([]string{"grantor", "--node-id", "g9", "--data-dir", t.TempDir(), "--bootstrap-expect", "3",
			"--rpc-addr", addr(0), "--raft-addr", addr(1), "--gossip-addr", addr(2), "--join", c.gossipAddrs(0)},
			p.cert("grantor", "g9", false)...)...).CombinedOutput()
		cancel()
		if !errors.As(err, &ee) || !strings.Contains(string(out), "gossip key is wrong or missing") {
			t.Fatalf("a grantor without the gossip key: %v, want refused for the key\n%s", err, out)
		}
		t.Logf("a grantor without the gossip key: exit %d: %s", ee.ExitCode(), lastLine(string(out)))
		r, err := grpcClient(t, l.rpcAddr(), p.creds("operator", "op")).Members(ctx, &grantorpb.MembersRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var voters []string
		for _, m := range r.Members {
			if m.NodeId == "g9" || m.Name == "g9" {
				t.Errorf("the grantor without the key is a member: %v", m)
			}
			if m.Voter {
				voters = append(voters, m.NodeId)
			}
		}
		if len(voters) != 3 {
			t.Errorf("voters %v, want the three grantors", voters)
		}
	})

	t.Run("a grantor off loopback without TLS", func(t *testing.T) {
		ports := freeLoopbackPorts(t, 3)
		rctx, cancel := context.WithTimeout(ctx, timeout) // killed if it does start
		defer cancel()
		cmd := exec.CommandContext(rctx, bin, "grantor", "--node-id", "g8", "--data-dir", t.TempDir(), "--bootstrap-expect", "3",
			"--rpc-addr", "0.0.0.0:"+strconv.Itoa(ports[0]), "--raft-addr", "127.0.0.1:"+strconv.Itoa(ports[1]),
			"--gossip-addr", "127.0.0.1:"+strconv.Itoa(ports[2]), "--join", c.gossipAddrs(0), "--gossip-key-file", p.key)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "--rpc-addr") || !strings.Contains(stderr.String(), "--insecure") {
			t.Fatalf("a grantor on 0.0.0.0 without TLS: %v, want exit 2 naming --rpc-addr and --insecure\n%s", err, stderr.String())
		}
	})

	// Afterwards: no grantor took the forged term, no lease was lost, the
	// cluster serves.
	noForgedTerm(t, c)
	a.waitEvent(t, a.events.mark(), ipc.EventRenewed, name) // renewed after every attack
	if lost := a.lost(); len(lost) > 0 {
		t.Fatalf("s1 lost a lease: %+v", lost[0].v)
	}
	if !held.Valid() {
		t.Fatal("s1's lease is no longer valid")
	}
	cli(t, a.socket, "check", name, "--token", held.Token).must(t, 0)
	acquireCLI(t, b, "trust/after", "--ttl", "5s", "--detached")
}

// A grantor or sidecar with an address other hosts reach refuses to start
// in clear text: exit 2, naming the address's flag and --insecure; with
// --insecure it starts, and says so.
func TestTrustClearTextRefusedOffLoopback(t *testing.T) {
	t.Parallel()
	ports := freeLoopbackPorts(t, 3)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	grantor := []string{"grantor", "--node-id", "g1", "--data-dir", t.TempDir(), "--raft-addr", addr(1), "--gossip-addr", addr(2), "--bootstrap-expect", "1"}
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{name: "grantor on all interfaces", args: append(grantor, "--rpc-addr", "0.0.0.0:"+strconv.Itoa(ports[0])), flag: "--rpc-addr"},
		{name: "grantor gossiping off loopback", args: append(grantor, "--rpc-addr", addr(0), "--join", "192.0.2.1:7403"), flag: "--join"},
		{name: "sidecar dialing grantors off loopback", args: []string{"daemon", "--socket", tempSocket(t), "--grantors", "192.0.2.1:7401"}, flag: "--grantors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args...) // killed if it does start
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2\n%s", err, stderr.String())
			}
			for _, want := range []string{tc.flag, "--insecure", "not a loopback address"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr does not name %s:\n%s", want, stderr.String())
				}
			}
		})
	}
	// With --insecure it starts, warning.
	g := startProcess(t, "insecure grantor", exec.Command(bin, append(grantor, "--rpc-addr", "0.0.0.0:"+strconv.Itoa(ports[0]), "--insecure")...))
	g.waitLine(t, 0, "running with --insecure")
	g.waitLine(t, 0, "leaseside grantor ready")
	g.term(t)
}

// `leaseside dev` run by root opens no TCP or UDP port, and another local
// user reaches its grantor by no path: not over the network (nothing
// listens), not over the grantor's Unix socket (0600 in a 0700 directory),
// not over the sidecar's socket (0660, root's group). Root, as a control,
// reaches the grantor's socket with the same probe.
func TestTrustDevOpensNoPort(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root: dev is run as root and probed by nobody")
	}
	// Directories anyone may enter, so that only what dev sets protects
	// its sockets.
	open := func() string {
		d, err := os.MkdirTemp("", "lsdev")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	socket, data := filepath.Join(open(), "s.sock"), filepath.Join(open(), "data")
	dev := startDev(t, socket, data)
	pid := dev.cmd.Process.Pid

	// The control: ss names this test's own listening TCP port and
	// bound UDP socket with its pid, so that its silence about dev below
	// means something.
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer tcp.Close()
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	for _, addr := range []string{tcp.Addr().String(), udp.LocalAddr().String()} {
		if !slices.ContainsFunc(ssLines(t, os.Getpid(), "-ltnup"), func(l string) bool { return strings.Contains(l, addr) }) {
			t.Fatalf("ss -ltnup does not list the test's own %s: the probe is broken", addr)
		}
	}

	for _, l := range ssLines(t, pid, "-ltnup") {
		t.Errorf("dev listens on a port: %s", l)
	}
	// Nor does it hold a connected TCP or UDP socket of its own.
	for _, l := range ssLines(t, pid, "-tunp") {
		t.Errorf("dev has a TCP or UDP socket: %s", l)
	}
	// Its listening Unix sockets are the sidecar's and the grantor's, both
	// with a path (an abstract one would have no file mode to keep others
	// out). The one other is the datagram socket a logging library in a
	// dependency (go-systemd's journal, under raft-wal) binds at start
	// under an abstract name the kernel picks: it never reads it, and
	// nothing sent there reaches anything.
	grpcPath := filepath.Join(data, "grantor", "grpc.sock")
	var paths []string
	for _, l := range ssLines(t, pid, "-lxp") {
		f := strings.Fields(l)
		switch {
		case len(f) > 4 && f[0] == "u_str" && f[1] == "LISTEN" && (f[4] == socket || f[4] == grpcPath):
			paths = append(paths, f[4])
		case len(f) > 4 && f[0] == "u_dgr" && f[1] == "UNCONN" && autobound.MatchString(f[4]):
		default:
			t.Errorf("dev listens on another Unix socket: %s", l)
		}
	}
	if slices.Sort(paths); !slices.Equal(paths, slices.Sorted(slices.Values([]string{socket, grpcPath}))) {
		t.Errorf("dev listens on the Unix sockets %q, want the sidecar's and the grantor's", paths)
	}
	for path, want := range map[string]os.FileMode{grpcPath: os.ModeSocket | 0o600, filepath.Dir(grpcPath): os.ModeDir | 0o700} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want || fi.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s: mode %v, uid %d; want %v, root's", path, fi.Mode(), fi.Sys().(*syscall.Stat_t).Uid, want)
		}
	}

	grpcSock := "unix:" + grpcPath
	probe := func(asNobody bool, args ...string) (int, string) {
		full := append([]string{bin}, args...)
		if asNobody {
			full = append([]string{"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"}, full...)
		}
		cmd := exec.Command(full[0], full[1:]...)
		cmd.Env = append(os.Environ(), "HOME=/")
		b, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(b)
		} else if err != nil {
			t.Fatalf("%v: %v", full, err)
		}
		return 0, string(b)
	}
	if code, out := probe(false, "members", "--grantors", grpcSock, "--json", "--timeout", "10s"); code != 0 {
		t.Fatalf("root's probe of the grantor's socket failed (exit %d): the probe itself is broken\n%s", code, out)
	}
	if code, out := probe(true, "members", "--grantors", grpcSock, "--json", "--timeout", "10s"); code == 0 || !strings.Contains(out, "permission denied") {
		t.Errorf("nobody's probe of the grantor's socket: exit %d, want refused for permission\n%s", code, out)
	}
	if code, out := probe(true, "status", "--socket", socket); code == 0 || !strings.Contains(strings.ToLower(out), "permission denied") {
		t.Errorf("nobody's probe of the sidecar's socket: exit %d, want refused for permission\n%s", code, out)
	}
}

// autobound is the name ss shows for a Unix socket the kernel bound to an
// abstract address of its choosing (five hex digits).
var autobound = regexp.MustCompile(`^@[0-9a-f]{5}$`)

// ssLines runs ss -H with flags (which must include -p) and returns the
// lines of the sockets of process pid.
func ssLines(t *testing.T, pid int, flags string) []string {
	t.Helper()
	out, err := exec.Command("ss", "-H", flags).CombinedOutput()
	if err != nil {
		t.Fatalf("ss %s: %v: %s", flags, err, out)
	}
	var ls []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "pid="+strconv.Itoa(pid)+",") {
			ls = append(ls, l)
		}
	}
	return ls
}

// --audit-log writes the audit trail as JSON lines, each naming who: a
// grant and a release by a sidecar's certificate, a call refused to it.
// On SIGHUP the file is opened again by its name, so a log rotated away
// is followed by a new one.
func TestTrustAuditLog(t *testing.T) {
	t.Parallel()
	p := newClusterPKI(t)
	c := newLoopbackCluster(t, 1)
	n := c.nodes[0]
	p.cert("grantor", n.id, false)
	n.tlsDir, n.keyFile = p.dir, p.key
	audit := filepath.Join(t.TempDir(), "audit.log")
	n.extra = []string{"--audit-log", audit}
	c.startAll()
	c.waitOffice(c.marks0())
	s := startSidecar(t, "sidecar s1", nil, append(p.cert("sidecar", "s1", false), "--grantors", c.rpcAddrs())...)

	type line struct {
		Event, Role, Name, Lease, Call string
		Token                          uint64
	}
	// lines reads the audit file's JSON lines; every line must decode.
	lines := func(path string) []line {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []line
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var v struct {
				Msg string `json:"msg"`
				line
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil || v.Msg != "audit" {
				t.Fatalf("audit log line %q: %v", l, err)
			}
			out = append(out, v.line)
		}
		return out
	}
	has := func(ls []line, want line) bool {
		for _, l := range ls {
			if l.Event == want.Event && l.Role == want.Role && l.Name == want.Name && l.Lease == want.Lease && l.Call == want.Call {
				return true
			}
		}
		return false
	}

	acquireCLI(t, s, "audit/one", "--ttl", "5s", "--detached")
	cli(t, s.socket, "release", "audit/one").must(t, 0)
	ctx5, cancel := context.WithTimeout(tctx(t), 5*time.Second)
	defer cancel()
	if _, err := grpcClient(t, n.rpcAddr(), p.creds("sidecar", "s1")).RemoveServer(ctx5, &grantorpb.RemoveServerRequest{NodeId: n.id}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("RemoveServer by a sidecar: %v", err)
	}
	ls := lines(audit)
	for _, want := range []line{
		{Event: "grant", Role: "sidecar", Name: "s1", Lease: "audit/one"},
		{Event: "release", Role: "sidecar", Name: "s1", Lease: "audit/one"},
		{Event: "refused", Role: "sidecar", Name: "s1", Call: "RemoveServer"},
	} {
		if !has(ls, want) {
			t.Errorf("no audit line %+v in %+v", want, ls)
		}
	}

	// Rotated away, then SIGHUP: the next lines go to a new file.
	if err := os.Rename(audit, audit+".1"); err != nil {
		t.Fatal(err)
	}
	mark := n.proc.out.mark()
	n.proc.cmd.Process.Signal(syscall.SIGHUP)
	n.proc.waitLine(t, mark, "reload done")
	acquireCLI(t, s, "audit/two", "--ttl", "5s", "--detached")
	if !has(lines(audit), line{Event: "grant", Role: "sidecar", Name: "s1", Lease: "audit/two"}) {
		t.Fatalf("the grant after the reopen is not in the new file: %+v", lines(audit))
	}
	if has(lines(audit+".1"), line{Event: "grant", Role: "sidecar", Name: "s1", Lease: "audit/two"}) {
		t.Fatal("the grant after the reopen went to the rotated file")
	}
}
