package grantor

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
)

// Seeds proven at their own address.
//
// A grantor's --join seeds are gossip addresses the operator chose; gossip
// lists each member at the address the member advertises, which
// memberlist takes as said. So, with TLS, a member's claim to be the
// grantor at a seed address counts in a join path (seedsSay) only once
// this node has proven it at that address itself: it dials the seed
// address over TCP and completes a mutual TLS handshake (ALPN
// pki.ALPNSeed) in which the server presents a grantor certificate of the
// member's node ID. Every grantor with TLS answers these handshakes on
// its gossip port (gossip.Config.Prove: a stream that opens with a TLS
// record instead of a memberlist message). A grantor elsewhere that
// advertises the seed's address cannot answer at it, and one at the
// address cannot present another name's certificate; a memberlist ping
// would not do, since its ack is matched by a sequence number the
// impostor sees in the probes this node sends it.
//
// The leader a seed gossips is proven the same way: gossip metadata is
// not signed, and a holder of the gossip key can gossip a live seed's
// name, at the seed's own address, with a higher incarnation and a leader
// of its choosing (a grantor certificate's name in no configuration),
// which the join path would then admit. So after the handshake the
// prover writes the leader its raft knows of, over TLS, and a claim is
// proven only for the leader its gossip metadata names when the seed says
// the same (a claim is the address, the name and that leader).
//
// Claims are proven when gossip lists them (at every gossip change) and
// again every seedReprove, so a claim stops counting within seedReprove
// of its seed going away; an unproven claim names nobody, nor the leader
// it gossips. With every seed down, a grantor without a configuration
// therefore follows no one, and says so in its log, until a seed answers
// at its address. A grantor's own configuration is not touched by any of
// this: its servers are admitted as before (raft_members.go).

const (
	// seedProofTimeout bounds one proof, the dial and the handshake, at
	// both ends.
	seedProofTimeout = 2 * time.Second
	// seedReprove is how often claims already proven are proven again.
	seedReprove = 5 * time.Second
)

// seedClaim is a member's claim to be grantor id at gossip address addr,
// knowing leader as the leader ("" when none).
type seedClaim struct{ addr, id, leader string }

// maxProvenLeader bounds the leader ID a prover writes (raft server IDs
// are far shorter).
const maxProvenLeader = 256

// seedProofs holds the claims proven at their address. Safe for
// concurrent use.
type seedProofs struct {
	mu     sync.Mutex
	proven map[seedClaim]bool
	// followsNoOne is whether the last pass proved no seed, and refused
	// the claims it could not prove, for logging changes only.
	followsNoOne bool
	refused      string
}

// has reports whether the claim of id at addr, naming leader, is proven.
func (p *seedProofs) has(addr, id, leader string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.proven[seedClaim{addr, id, leader}]
}

// provesID reports whether some proven claim is grantor id's.
func (p *seedProofs) provesID(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.proven {
		if c.id == id {
			return true
		}
	}
	return false
}

// seedProven returns what seedsSay checks a seed claim with: nil (gossip
// as said) without TLS, where no certificate names anyone, or without
// seeds, where there is no address to prove.
func (n *Node) seedProven() func(addr, id, leader string) bool {
	if n.cfg.TLS == nil || len(n.seeds) == 0 {
		return nil
	}
	return n.seedProofs.has
}

// proveSeed serves a proof on the gossip port (gossip.Config.Prove): a
// TLS handshake with this node's certificate to a grantor's, then the
// leader this node's raft knows of and a newline.
func (n *Node) proveSeed(c net.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), seedProofTimeout)
	defer cancel()
	tc := tls.Server(c, n.cfg.TLS.ServerConfig(pki.ALPNSeed, pki.Peer{Roles: []string{pki.RoleGrantor}}))
	defer tc.Close()
	if tc.HandshakeContext(ctx) != nil {
		return // the prover learns nothing: the dialer judges
	}
	leader := ""
	if r := n.gate.raft.Load(); r != nil {
		_, id := r.LeaderWithID()
		leader = string(id)
	}
	defer context.AfterFunc(ctx, func() { _ = tc.Close() })()
	_, _ = tc.Write([]byte(leader + "\n"))
}

// errLeaderUnproven is proveClaim's error when the seed answers with a
// leader other than the one its gossip metadata names.
var errLeaderUnproven = errors.New("it names another leader than gossip says it does")

// proveClaim dials addr and returns nil if the grantor answering there
// holds a grantor certificate named id.
func (n *Node) proveClaim(ctx context.Context, c seedClaim) error {
	ctx, cancel := context.WithTimeout(ctx, seedProofTimeout)
	defer cancel()
	d := tls.Dialer{Config: n.cfg.TLS.ClientConfig(pki.ALPNSeed, pki.Peer{Roles: []string{pki.RoleGrantor}, Name: c.id})}
	conn, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	defer context.AfterFunc(ctx, func() { _ = conn.Close() })()
	line, err := bufio.NewReaderSize(io.LimitReader(conn, maxProvenLeader+1), maxProvenLeader+1).ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the leader it knows: %w", err)
	}
	if said := strings.TrimSuffix(line, "\n"); said != c.leader {
		return fmt.Errorf("%w: it says %q, gossip %q", errLeaderUnproven, said, c.leader)
	}
	return nil
}

// seedClaims lists the claims gossip makes now of the seed addresses: the
// alive grantors other than this node listed at one.
func seedClaims(ms []gossip.MemberInfo, seeds map[string]bool, self string) []seedClaim {
	var out []seedClaim
	for _, in := range ms {
		if aliveOther(in, self) && seeds[in.Addr] {
			out = append(out, seedClaim{in.Addr, in.Meta.NodeID, in.Meta.LeaderID})
		}
	}
	return out
}

// proveSeeds keeps n.seedProofs current (see the top of this file): new
// claims at every gossip change, every claim every seedReprove.
func (n *Node) proveSeeds() {
	defer n.watchers.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		changed := n.gossip.Changes()
		all := false
		select {
		case <-changed:
		case <-t.C:
			all = true
			t.Reset(seedReprove)
		case <-n.done:
			return
		}
		n.proveClaims(ctx, seedClaims(n.gossip.Members(), n.seeds, n.cfg.NodeID), all)
	}
}

// proveClaims proves the claims not proven yet (all of them when all),
// asks the proven ones for their voters while this node has no raft
// configuration (seed_voters.go), replaces n.seedProofs with the outcome,
// and logs when this node comes to follow no seed or stops doing so. The
// voters are kept before the proofs count: a grantor that a seed's proof
// lets in (the leader it names) can bring this node a configuration at
// once, and the seed may die the moment after.
func (n *Node) proveClaims(ctx context.Context, claims []seedClaim, all bool) {
	p := &n.seedProofs
	next := map[seedClaim]bool{}
	var proven []seedClaim
	var wg sync.WaitGroup
	var mu sync.Mutex
	var refused []string
	for _, c := range claims {
		if !all && p.has(c.addr, c.id, c.leader) {
			mu.Lock() // the provers started for earlier claims write next too
			next[c] = true
			proven = append(proven, c)
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := n.proveClaim(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				next[c] = true
				proven = append(proven, c)
				return
			}
			refused = append(refused, c.id+" at "+c.addr+": "+err.Error())
		}()
	}
	wg.Wait()
	n.askSeedVoters(ctx, proven)
	slices.Sort(refused)
	p.mu.Lock()
	p.proven = next
	none := len(next) == 0
	changed := none != p.followsNoOne || fmt.Sprint(refused) != p.refused
	p.followsNoOne, p.refused = none, fmt.Sprint(refused)
	p.mu.Unlock()
	if !changed {
		return
	}
	switch seeds := slices.Sorted(maps.Keys(n.seeds)); {
	case none && len(n.raft.GetConfiguration().Configuration().Servers) == 0:
		n.log.Warn("grantor: no --join seed is proven at its address; this grantor has no raft configuration and follows no one until one is",
			"seeds", seeds, "unproven_claims", refused)
	case len(refused) > 0:
		n.log.Warn("grantor: a grantor gossip lists at a --join seed's address does not answer there with its certificate; until it does, its claim names no one",
			"seeds", seeds, "unproven_claims", refused)
	case !none:
		n.log.Info("grantor: every --join seed gossip lists is proven at its address", "seeds", seeds)
	}
}
