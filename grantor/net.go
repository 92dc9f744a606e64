package grantor

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// The node's network: its raft transport and its gRPC listener.

// newTransport makes the raft transport Config asks for: in memory
// (InMemoryRaft), over mutual TLS (TLS), or plain TCP.
func (n *Node) newTransport(hlog hclog.Logger) (*contactTransport, error) {
	cfg := n.cfg
	if cfg.InMemoryRaft {
		_, it := raft.NewInmemTransport(raft.ServerAddress("inmem:" + cfg.NodeID))
		return newContactTransport(it), nil
	}
	// MaxRPCsInFlight 1 turns off pipelined replication: raft v1.8.0's
	// netPipeline can deadlock after a follower rejects an append (both
	// its channels unbuffered), wedging replication to that follower and
	// Raft.Shutdown; grafana/pyroscope#5518 hit the same. HashiCorp's own
	// measurements (hashicorp/raft#541) show pipelining gains little.
	ncfg := raft.NetworkTransportConfig{
		Logger:          hlog,
		MaxPool:         3,
		MaxRPCsInFlight: 1,
		Timeout:         transportTimeout,
	}
	if cfg.TLS != nil {
		t, err := newTLSTransport(cfg.RaftAddr, cfg.TLS, ncfg, n.log, n.gate, n.refusedRaft)
		if err != nil {
			return nil, fmt.Errorf("grantor: raft transport on %s: %w", cfg.RaftAddr, err)
		}
		ct := newContactTransport(t)
		ct.target = dialTarget
		return ct, nil
	}
	nt, err := raft.NewTCPTransportWithConfig(cfg.RaftAddr, nil, &ncfg)
	if err != nil {
		return nil, fmt.Errorf("grantor: raft transport on %s: %w", cfg.RaftAddr, err)
	}
	return newContactTransport(nt), nil
}

// streamWorkers is how many goroutines the gRPC server keeps to run
// calls on (grpc.NumStreamWorkers); a call finds a new goroutine only
// when every one is busy. Without them every call ran on a goroutine of
// its own, whose stack grew from the runtime's starting size through the
// interceptor, the lessor and raft's future, copied at each doubling:
// 7% of the leader's CPU in a lock cycle (runtime.morestack, perf at
// 60ff853). A worker keeps the stack its calls grew. Long streams
// (KeepAlive, Watch) hold a worker each while they last, so past this
// many the calls start goroutines as before; 256 idle workers cost a few
// MB of stacks at most.
const streamWorkers = 256

// serverOptions are the gRPC server's: credentials (with TLS, each
// connection charged to its certificate's account: account.go), the
// authorisation interceptor (always: without TLS it gives every call
// InsecureIdentity), and the limits at the network edge
// (grpc_limits.go). Calls run on a pool of streamWorkers goroutines.
func (n *Node) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(n.unaryAuth),
		grpc.ChainStreamInterceptor(n.streamAuth),
		grpc.MaxRecvMsgSize(n.cfg.MaxRecvMsgSize),
		grpc.NumStreamWorkers(streamWorkers),
	}
	opts = append(opts, n.edge.serverOptions(n.cfg.MaxConcurrentStreams, n.cfg.TLS != nil)...)
	if n.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(n.edge.credentials(n.cfg.TLS.ServerCredentials())))
	}
	return opts
}

// refusedRPC logs gRPC connections or calls the edge limits refused:
// count of them from source (an address, or a certificate's ROLE/NAME)
// for reason.
func (n *Node) refusedRPC(source, reason string, count int) {
	n.log.Warn("grantor: gRPC refused", "source", source, "reason", reason, "count", count)
}

// refusedRaft counts and audits inbound raft connections or RPCs the TLS
// transport refused: count of them from source for reason.
func (n *Node) refusedRaft(source, reason string, count int) {
	n.metrics.refusedRaft.Add(uint64(count))
	n.audit.refusedRaft(source, reason, count)
}

// unixPath returns the socket path of a "unix:PATH" address, else "".
func unixPath(addr string) string {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok {
		return strings.TrimPrefix(p, "//")
	}
	return ""
}

// listenRPC binds the gRPC listener: TCP, or a Unix socket ("unix:PATH")
// that only this uid may connect to: mode 0600, in a directory no other
// user may enter (made 0700 when it is created here; one open to others
// is refused, since the socket is briefly there before its chmod).
func listenRPC(addr string) (net.Listener, error) {
	path := unixPath(addr)
	if path == "" {
		lis, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("grantor: gRPC listener on %s: %w", addr, err)
		}
		return lis, nil
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%w: RPCAddr %q: a unix socket path must be absolute", ErrInvalidConfig, addr)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("grantor: gRPC socket directory: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("grantor: gRPC socket directory: %w", err)
	} else if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: RPCAddr %q: directory %s is open to other users (mode %v); the socket needs one only this user can enter (0700)",
			ErrInvalidConfig, addr, dir, fi.Mode().Perm())
	}
	_ = os.Remove(path) // a socket left by a process that died
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("grantor: gRPC listener on %s: %w", addr, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		lis.Close()
		return nil, fmt.Errorf("grantor: gRPC socket %s: %w", path, err)
	}
	return lis, nil
}

// dialCredentials are the credentials for calling another grantor over
// gRPC: this node's certificate, and a grantor's wanted at the other end.
func (n *Node) dialCredentials() credentials.TransportCredentials {
	if n.cfg.TLS != nil {
		return n.cfg.TLS.ClientCredentials()
	}
	return insecure.NewCredentials()
}

// admissible reports whether the grantor that gossip says is id, at
// raftAddr, may enter the raft configuration: with TLS, only if the
// server there presents a grantor certificate named id (gossip is a hint,
// never a credential). A refusal is logged (warnClaim) and audited;
// reconciliation asks again at its next pass.
func (n *Node) admissible(ctx context.Context, id, raftAddr string) bool {
	t, ok := n.trans.baseTransport.(*tlsTransport)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, peerTimeout)
	defer cancel()
	if err := t.probe(ctx, id, raftAddr); err != nil {
		n.warnClaim(id, raftAddr, "its raft address does not present a grantor certificate with its name", "err", err)
		n.audit.refusedClaim(raftAddr, fmt.Sprintf("gossip member claims grantor %q: %v", id, err))
		return false
	}
	return true
}
