// Package gossip is leaseside's discovery layer: grantors and sidecars form
// one hashicorp/memberlist cluster in which every member gossips a small
// Meta about itself (role, raft node ID, gRPC and raft addresses, whether it
// is a voter, which grantor it believes leads raft).
//
// Sidecars use it to find the grantors and follow leader changes
// (Member.Grantors, Member.Changes); grantors use it to see each other
// before they bootstrap raft (Member.WaitVoters, Consul's bootstrap-expect)
// and to list members.
//
// Gossip is for discovery, never for safety (docs/design.md section 2). Nothing
// this package reports may shorten, end or extend a lease: "a host looks
// dead" and "gossip says X leads" are hints. A sidecar that dials the leader
// Grantors names is told by the grantor itself (NotLeader) when the hint is
// stale, and the lease timing model alone decides validity.
//
// Member states come from memberlist's events. memberlist gives no event
// and no race-free accessor for suspicion, so a member is reported alive
// until memberlist declares it dead. A member that leaves first gossips a
// leaving flag in its metadata, which is how the others tell "left" from
// "dead" (memberlist v0.7.0 does not expose that distinction to its
// delegates). A member that gets the leave notice before the flag would
// list it as dead; so a member that leaves first syncs its state with
// every alive grantor until each lists it as leaving, and every state sync
// carries the members the sender lists as left, so that the others learn
// it from any member that saw the flag (leaving.go). The flag can be
// gossiped ahead of the leave (AnnounceLeaving): a grantor does so before
// it takes itself out of raft, so that no leader adds it back.
//
// # Wire
//
// Every packet and stream carries the memberlist label "leaseside", so a
// member refuses other memberlist or Serf clusters (Consul, Nomad). With
// Keys, gossip is AES-GCM encrypted with the first key, and what comes in
// must decrypt with one of them: a member without a key of the cluster's
// keyring is refused; Start says so (ErrGossipKey). SetKeys rotates the
// keyring while the member runs (memberlist's Keyring).
//
// # Metadata encoding (Meta)
//
// Node metadata is at most memberlist.MetaMaxSize (512) bytes:
//
//	byte 0     encoding version
//	byte 1     flags: bit 0 voter, bit 1 leaving; unknown bits are ignored
//	then       Role, NodeID, RPCAddr, RaftAddr, LeaderID, Version, each a
//	           uvarint length followed by that many bytes
//	then       Instance, a uvarint (absent from the first builds: 0)
//
// Fields are only ever appended: a decoder ignores bytes after the fields
// it knows. A change that old decoders cannot read takes a new version;
// a member whose version is unknown is listed with MetaErr set and is
// never taken for a grantor.
//
// Version history:
//
//	1  the fields above (leaseside's first gossip release; Instance was
//	   appended later, within version 1)
//
// # Left claims (state syncs)
//
// The delegate's state in every push/pull sync is the members the sender
// lists as left, at most 1,024:
//
//	byte 0     encoding version (1)
//	then       a uvarint count, then per member: a uvarint name length
//	           (at most 512), the name, its Instance as a uvarint
//
// A receiver refuses the whole of anything else, and takes a claim only
// for a member it lists as dead with the same Instance. Builds before it
// send no state and ignore what they get. Version history: 1 the above.
package gossip
