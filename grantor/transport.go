package grantor

import (
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// baseTransport is what contactTransport wraps: raft's NetworkTransport
// (plain TCP), the TLS transport (raft_tls.go), or an InmemTransport
// (dev, which opens no port).
type baseTransport interface {
	raft.Transport
	raft.WithClose
	raft.WithPreVote
}

// contactTransport is the raft transport the node hands raft. It notes
// when each server last answered this node's AppendEntries (heartbeats and
// replication) or InstallSnapshot. Only a leader sends those, so it is the
// leader's view of its followers' last contact, as raft keeps it internally
// (followerReplication.LastContact) without exporting it: raft.Stats only
// has this node's own last contact with its leader. The times are for
// operators (Members) and for promoting a staged grantor (discovery.go);
// no lease decision reads them. Each of those requests is numbered as it
// is sent, so that the leader can tell an answer to a request sent after
// some moment (requests) from one sent before it (answeredAfter,
// confirmedAfter): a verify round counts only the later (verify.go).
//
// With TLS, it also tells the stream layer which server each outbound RPC
// is for (dialTarget), so that the dialer checks the certificate of the
// server it reaches names that server.
type contactTransport struct {
	baseTransport
	// target rewrites the address raft gives for server id into what the
	// wrapped transport dials; nil keeps it.
	target func(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress
	// closeStreams closes the outbound pooled connections, if the wrapped
	// transport has any.
	closeStreams func()
	// refused, if set, is told of a server that refused a vote request
	// as a non-member's (raft_members.go). Set before raft starts.
	refused func(id raft.ServerID)

	// sent numbers the requests that count as contact, as they are sent.
	sent atomic.Uint64

	mu      sync.Mutex
	last    map[raft.ServerID]answer
	changed chan struct{} // closed at the next contact once taken
	taken   bool
}

// answer is a server's latest answer: when it came, the highest number of
// a request it has answered, and the highest it has answered with success
// (the follower accepts this node as its leader: a verify round counts
// those, verify.go).
type answer struct {
	at      time.Time
	req, ok uint64
}

var (
	_ raft.Transport   = (*contactTransport)(nil)
	_ raft.WithClose   = (*contactTransport)(nil)
	_ raft.WithPreVote = (*contactTransport)(nil)
)

func newContactTransport(t baseTransport) *contactTransport {
	c := &contactTransport{baseTransport: t, last: map[raft.ServerID]answer{}, changed: make(chan struct{}), closeStreams: func() {}}
	if s, ok := t.(interface{ CloseStreams() }); ok {
		c.closeStreams = s.CloseStreams
	}
	return c
}

func (t *contactTransport) dial(id raft.ServerID, addr raft.ServerAddress) raft.ServerAddress {
	if t.target == nil {
		return addr
	}
	return t.target(id, addr)
}

// AppendEntriesPipeline implements raft.Transport.
func (t *contactTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.baseTransport.AppendEntriesPipeline(id, t.dial(id, target))
}

// AppendEntries implements raft.Transport.
func (t *contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	req := t.sent.Add(1)
	err := t.baseTransport.AppendEntries(id, t.dial(id, target), args, resp)
	if err == nil {
		t.contact(id, req, resp.Success)
	}
	return err
}

// RequestVote implements raft.Transport.
func (t *contactTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest, resp *raft.RequestVoteResponse) error {
	return t.voteErr(id, t.baseTransport.RequestVote(id, t.dial(id, target), args, resp))
}

// RequestPreVote implements raft.WithPreVote.
func (t *contactTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.voteErr(id, t.baseTransport.RequestPreVote(id, t.dial(id, target), args, resp))
}

// voteErr tells refused of a vote request server id refused as a
// non-member's, and returns err. Only the text of the remote error
// crosses raft's transport: notAMember is the marker.
func (t *contactTransport) voteErr(id raft.ServerID, err error) error {
	if err != nil && t.refused != nil && strings.Contains(err.Error(), notAMember) {
		t.refused(id)
	}
	return err
}

// TimeoutNow implements raft.Transport.
func (t *contactTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest, resp *raft.TimeoutNowResponse) error {
	return t.baseTransport.TimeoutNow(id, t.dial(id, target), args, resp)
}

// InstallSnapshot implements raft.Transport.
func (t *contactTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	req := t.sent.Add(1)
	err := t.baseTransport.InstallSnapshot(id, t.dial(id, target), args, resp, data)
	if err == nil {
		t.contact(id, req, resp.Success)
	}
	return err
}

// CloseStreams closes the pooled outbound connections, so that the peers'
// handlers of them end; Close alone only stops the listener.
func (t *contactTransport) CloseStreams() { t.closeStreams() }

// contact notes that server id answered request number req, with success
// or not.
func (t *contactTransport) contact(id raft.ServerID, req uint64, success bool) {
	now := time.Now()
	t.mu.Lock()
	a := t.last[id]
	a.at, a.req = now, max(req, a.req)
	if success {
		a.ok = max(req, a.ok)
	}
	t.last[id] = a
	if t.taken {
		close(t.changed)
		t.changed, t.taken = make(chan struct{}), false
	}
	t.mu.Unlock()
}

// contacts returns a channel that is closed at the next contact.
func (t *contactTransport) contacts() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.taken = true
	return t.changed
}

// lastContact returns how long ago server id last answered, or false if
// it never has since this node started.
func (t *contactTransport) lastContact(id raft.ServerID) (time.Duration, bool) {
	t.mu.Lock()
	a, ok := t.last[id]
	t.mu.Unlock()
	if !ok {
		return 0, false
	}
	return time.Since(a.at), true
}

// requests returns the number of the last request sent so far: a request
// numbered above it is sent after this call.
func (t *contactTransport) requests() uint64 { return t.sent.Load() }

// answeredAfter returns how long ago server id last answered, if it has
// answered a request numbered above req (one sent after requests returned
// req); else false.
func (t *contactTransport) answeredAfter(id raft.ServerID, req uint64) (time.Duration, bool) {
	t.mu.Lock()
	a := t.last[id]
	t.mu.Unlock()
	if a.req <= req {
		return 0, false
	}
	return time.Since(a.at), true
}

// confirmedAfter reports whether server id has answered with success a
// request numbered above req (one sent after requests returned req).
func (t *contactTransport) confirmedAfter(id raft.ServerID, req uint64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last[id].ok > req
}
