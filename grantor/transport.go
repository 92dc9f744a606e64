package grantor

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// contactTransport is raft's TCP transport, noting when each server last
// answered this node's AppendEntries (heartbeats and replication) or
// InstallSnapshot. Only a leader sends those, so it is the leader's view
// of its followers' last contact, as raft keeps it internally
// (followerReplication.LastContact) without exporting it: raft.Stats only
// has this node's own last contact with its leader.
//
// The times are for operators (Members); no lease decision reads them.
type contactTransport struct {
	*raft.NetworkTransport

	mu      sync.Mutex
	last    map[raft.ServerID]time.Time
	changed chan struct{} // closed at the next contact once taken
	taken   bool
}

var (
	_ raft.Transport   = (*contactTransport)(nil)
	_ raft.WithClose   = (*contactTransport)(nil)
	_ raft.WithPreVote = (*contactTransport)(nil)
)

func newContactTransport(t *raft.NetworkTransport) *contactTransport {
	return &contactTransport{NetworkTransport: t, last: map[raft.ServerID]time.Time{}, changed: make(chan struct{})}
}

// AppendEntries implements raft.Transport.
func (t *contactTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil {
		t.contact(id)
	}
	return err
}

// InstallSnapshot implements raft.Transport.
func (t *contactTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	err := t.NetworkTransport.InstallSnapshot(id, target, args, resp, data)
	if err == nil {
		t.contact(id)
	}
	return err
}

func (t *contactTransport) contact(id raft.ServerID) {
	now := time.Now()
	t.mu.Lock()
	t.last[id] = now
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
	at, ok := t.last[id]
	t.mu.Unlock()
	if !ok {
		return 0, false
	}
	return time.Since(at), true
}
