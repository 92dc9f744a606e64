package grantor

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// cmdType is the first byte of every raft log entry the grantor writes.
//
// ONLY APPEND TO THIS LIST. A raft log outlives the binary that wrote it:
// a value once used keeps its meaning forever, and is never reused.
type cmdType uint8

const (
	_                 cmdType = iota // 0 is never a valid command
	cmdAcquire                       // 1: acquireCmd
	cmdRelease                       // 2: releaseCmd
	cmdRevoke                        // 3: revokeCmd, proposed by the leader on expiry
	cmdCloseSession                  // 4: closeSessionCmd, proposed by the leader for idle sessions
	cmdRegisterNode                  // 5: registerNodeCmd, a node's gRPC address
	cmdAcquire2                      // 6: acquireCmd whose ID.AlsoReceived is applied (received.go)
	cmdRelease2                      // 7: releaseCmd whose ID.AlsoReceived is applied
	cmdAcquire3                      // 8: acquireCmd as cmdAcquire2, and a holder asking again takes the next token
	cmdAcquire4                      // 9: acquireCmd as cmdAcquire3, with Identity (session ownership) and Limit applied
	cmdRelease3                      // 10: releaseCmd as cmdRelease2, with Identity applied
	cmdRelease4                      // 11: releaseCmd as cmdRelease3, with the first waiter's Acquire (Next) applied (handoff.go)
	cmdExpireSession                 // 12: expireSessionCmd, proposed by the leader when a session's expiry passed
	cmdAcquire5                      // 13: acquireCmd as cmdAcquire4, with MaxHolders (semaphores) and Value applied (semaphore.go)
	cmdRelease5                      // 14: releaseCmd as cmdRelease4, whose Next is applied as a cmdAcquire5
	cmdExpireSession2                // 15: expireSessionCmd whose Next are applied as cmdAcquire5
	cmdProclaim                      // 16: proclaimCmd, a holder's new value for its grant (semaphore.go)
	cmdAcquire6                      // 17: acquireCmd as cmdAcquire5; a session the entry opened and a refusal left empty is not kept (fsm.dropEmptySession)
	cmdAcquire7                      // 18: acquireCmd as cmdAcquire6, with LockDelay applied (lockdelay.go)
	cmdRelease6                      // 19: releaseCmd as cmdRelease5, with OwnerEnded applied (lockdelay.go)
	cmdEndDelay                      // 20: endDelayCmd, proposed by the leader when a name's lock-delay is over (lockdelay.go)
	cmdAcquire8                      // 21: acquireCmd as cmdAcquire7, with Final applied: its refusal is the request's outcome, remembered (outcome.go)
	cmdWithdraw                      // 22: acquireCmd withdrawn: never granted; answered the request's outcome, or refused for good (outcome.go)
	cmdRevoke2                       // 23: revokeCmd of an operator (By): the name stays delayed for the grant's term plus its lock-delay (revoke.go)
	cmdEndGrant                      // 24: endGrantCmd, proposed by the leader for a grant a keepalive names untold or owner-ended (untold.go)
	cmdCloseSession2                 // 25: closeSessionCmd applied only to a session that holds nothing and whose record remembers no grant or release, unless Kept (expiry.go)
	cmdAcquire9                      // 26: acquireCmd as cmdAcquire8, with Shared applied (shared.go)
	cmdRelease7                      // 27: releaseCmd as cmdRelease6, whose Next's Shared is applied
	cmdExpireSession3                // 28: expireSessionCmd as cmdExpireSession2, whose Next's Shared are applied
	cmdEndDelay2                     // 29: endDelayCmd as cmdEndDelay, whose Next's Shared is applied
	cmdEndGrant2                     // 30: endGrantCmd as cmdEndGrant, whose Next's Shared is applied
	cmdAcquireB                      // 31: acquireCmd as cmdAcquire9, its body binary (commands_binary.go)
	cmdReleaseB                      // 32: releaseCmd as cmdRelease7, its body binary (commands_binary.go)
)

// Which command types a grantor may propose (versions.go). A grantor that
// meets a type it does not know halts (fsm.go), so a leader proposes a
// type only when every server in the raft configuration has registered
// that it applies it.
const (
	// newestCmd is the newest type this binary applies.
	newestCmd = cmdReleaseB
	// baselineCmd is what a server that registered nothing is taken to
	// apply: the types of grantors built before registration.
	baselineCmd = cmdRegisterNode
)

func (t cmdType) String() string {
	switch t {
	case cmdAcquire:
		return "acquire"
	case cmdRelease:
		return "release"
	case cmdRevoke:
		return "revoke"
	case cmdCloseSession:
		return "close-session"
	case cmdRegisterNode:
		return "register-node"
	case cmdAcquire2:
		return "acquire2"
	case cmdRelease2:
		return "release2"
	case cmdAcquire3:
		return "acquire3"
	case cmdAcquire4:
		return "acquire4"
	case cmdRelease3:
		return "release3"
	case cmdRelease4:
		return "release4"
	case cmdExpireSession:
		return "expire-session"
	case cmdAcquire5:
		return "acquire5"
	case cmdRelease5:
		return "release5"
	case cmdExpireSession2:
		return "expire-session2"
	case cmdProclaim:
		return "proclaim"
	case cmdAcquire6:
		return "acquire6"
	case cmdAcquire7:
		return "acquire7"
	case cmdRelease6:
		return "release6"
	case cmdEndDelay:
		return "end-delay"
	case cmdAcquire8:
		return "acquire8"
	case cmdWithdraw:
		return "withdraw"
	case cmdRevoke2:
		return "revoke2"
	case cmdEndGrant:
		return "end-grant"
	case cmdCloseSession2:
		return "close-session2"
	case cmdAcquire9:
		return "acquire9"
	case cmdRelease7:
		return "release7"
	case cmdExpireSession3:
		return "expire-session3"
	case cmdEndDelay2:
		return "end-delay2"
	case cmdEndGrant2:
		return "end-grant2"
	case cmdAcquireB:
		return "acquire-bin"
	case cmdReleaseB:
		return "release-bin"
	}
	return fmt.Sprintf("cmd(%d)", uint8(t))
}

// The command bodies are JSON after the type byte, except those of
// cmdAcquireB and cmdReleaseB (binaryCmd), which are binary. encoding/json writes
// struct fields in declaration order and no maps appear in commands, so the
// encoding is deterministic. Field names are part of the log format: only
// add fields (old entries decode with the zero value), never rename them.

// requestID is grantorpb.RequestID inside the log.
type requestID struct {
	Session      string `json:"session"`
	Seq          uint64 `json:"seq"`
	FirstUnacked uint64 `json:"first_unacked,omitempty"`
	// AlsoReceived is only applied in cmdAcquire2 and cmdRelease2 entries.
	AlsoReceived []uint64 `json:"also_received,omitempty"`
}

type acquireCmd struct {
	ID    requestID     `json:"id"`
	Lease string        `json:"lease"`
	Owner string        `json:"owner"`
	TTL   time.Duration `json:"ttl_ns"`
	// Identity is the caller's identity name (ownership.go); Limit, when
	// positive, the most live leases that identity may hold. Applied in
	// cmdAcquire4 and later only.
	Identity string `json:"identity,omitempty"`
	Limit    int    `json:"limit,omitempty"`
	// MaxHolders, above 1, makes the lease a semaphore of that many
	// holders; Value is stored with the grant. Applied in cmdAcquire5
	// and later only (semaphore.go).
	MaxHolders int    `json:"max_holders,omitempty"`
	Value      string `json:"value,omitempty"`
	// LockDelay is stored with an exclusive grant: how long its name stays
	// delayed after the grant ends without a release. Applied in
	// cmdAcquire7 and later only (lockdelay.go).
	LockDelay time.Duration `json:"lock_delay_ns,omitempty"`
	// caller is the verified caller, never written to the log: a waiter
	// is charged to its account (account.go).
	caller Identity
	// Final makes a refusal of this Acquire its request's outcome, which
	// the FSM remembers: a call without wait, or a waiter's last try.
	// Applied in cmdAcquire8 only (outcome.go).
	Final bool `json:"final,omitempty"`
	// Shared asks for a shared grant (read/write locks, shared.go).
	// Applied in cmdAcquire9 and in the Next of cmdRelease7,
	// cmdExpireSession3, cmdEndDelay2 and cmdEndGrant2 only.
	Shared bool `json:"shared,omitempty"`
}

type releaseCmd struct {
	ID    requestID `json:"id"`
	Lease string    `json:"lease"`
	Owner string    `json:"owner"`
	Token uint64    `json:"token"`
	// Identity is applied in cmdRelease3 and later only.
	Identity string `json:"identity,omitempty"`
	// Next is the Acquire of the lease's first waiter, applied in the
	// same entry when the release frees the lease; cmdRelease4 only.
	Next *acquireCmd `json:"next,omitempty"`
	// OwnerEnded says the grant's owner ended without releasing it: its
	// name stays delayed for the grant's lock-delay. cmdRelease6 only.
	OwnerEnded bool `json:"owner_ended,omitempty"`
	// Lapsed, with OwnerEnded, says the grant was not released: its
	// holder's deadline passed, and its sidecar ends it sooner than its
	// session would. It changes no state, only what watchers are told of
	// the end (expired, not released), so it needs no command type of
	// its own: a grantor that does not know it tells released.
	Lapsed bool `json:"lapsed,omitempty"`
}

type revokeCmd struct {
	Lease string `json:"lease"`
	Token uint64 `json:"token"`
	// By is the operator who revoked the grant (role/name); applied in
	// cmdRevoke2 only (revoke.go).
	By string `json:"by,omitempty"`
}

type closeSessionCmd struct {
	Session string `json:"session"`
	// Kept says the leader kept the record for outcomeKeep after the
	// session was last seen (expiry.go): a cmdCloseSession2 then closes it
	// even if it remembers a grant or a release.
	Kept bool `json:"kept,omitempty"`
}

type registerNodeCmd struct {
	NodeID  string `json:"node_id"`
	RPCAddr string `json:"rpc_addr"`
	// MaxCmd is the newest command type the node applies; 0 (absent, as
	// older grantors write it) means baselineCmd.
	MaxCmd cmdType `json:"max_cmd,omitempty"`
}

// encodeCmd returns the log entry for body: the type byte, then JSON.
func encodeCmd(t cmdType, body any) []byte {
	b, err := json.Marshal(body)
	if err != nil {
		// Only the types above are encoded; none can fail.
		panic(fmt.Sprintf("grantor: encoding %v command: %v", t, err))
	}
	return append([]byte{byte(t)}, b...)
}

// acquireEntry is the log entry of an Acquire: cmdAcquireB when allowed
// (the newest type every server applies) permits it, else the newest JSON
// type that allowed permits and the Acquire needs (cmdAcquire9 only for a
// shared one): cmdAcquire3, else
// cmdAcquire2 when it lists also_received, else cmdAcquire without the
// list (forgetting is a permission, not an order). A semaphore or a value
// needs cmdAcquire5; the lessor refuses them before (ErrNotSupported).
func acquireEntry(c acquireCmd, allowed cmdType) []byte {
	if allowed >= binaryCmd {
		return appendAcquireB([]byte{byte(cmdAcquireB)}, &c)
	}
	if c.Shared && allowed >= sharedCmd {
		return encodeCmd(cmdAcquire9, c)
	}
	c.Shared = false
	if allowed >= outcomeCmd {
		return encodeCmd(cmdAcquire8, c)
	}
	c.Final = false
	if allowed >= lockDelayCmd {
		return encodeCmd(cmdAcquire7, c)
	}
	c.LockDelay = 0
	if allowed >= cmdAcquire6 {
		return encodeCmd(cmdAcquire6, c)
	}
	if allowed >= cmdAcquire5 {
		return encodeCmd(cmdAcquire5, c)
	}
	c.MaxHolders, c.Value = 0, ""
	if allowed >= cmdAcquire4 {
		return encodeCmd(cmdAcquire4, c)
	}
	c.Identity, c.Limit = "", 0
	switch {
	case allowed >= cmdAcquire3:
		return encodeCmd(cmdAcquire3, c)
	case len(c.ID.AlsoReceived) > 0 && allowed >= cmdAcquire2:
		return encodeCmd(cmdAcquire2, c)
	}
	c.ID.AlsoReceived = nil
	return encodeCmd(cmdAcquire, c)
}

// releaseEntry is the log entry of a Release (see acquireEntry).
func releaseEntry(c releaseCmd, allowed cmdType) []byte {
	if allowed >= binaryCmd {
		return appendReleaseB([]byte{byte(cmdReleaseB)}, &c)
	}
	if c.Next != nil && c.Next.Shared && allowed >= sharedCmd {
		return encodeCmd(cmdRelease7, c)
	}
	c.Next = unshared(c.Next)
	if allowed >= lockDelayCmd {
		return encodeCmd(cmdRelease6, c)
	}
	c.OwnerEnded, c.Lapsed = false, false
	if c.Next != nil && c.Next.LockDelay != 0 {
		next := *c.Next
		next.LockDelay = 0
		c.Next = &next
	}
	if allowed >= cmdRelease5 {
		return encodeCmd(cmdRelease5, c)
	}
	if c.Next != nil {
		next := *c.Next
		next.MaxHolders, next.Value = 0, ""
		c.Next = &next
	}
	if allowed >= cmdRelease4 {
		return encodeCmd(cmdRelease4, c)
	}
	c.Next = nil
	if allowed >= cmdRelease3 {
		return encodeCmd(cmdRelease3, c)
	}
	c.Identity = ""
	if len(c.ID.AlsoReceived) > 0 && allowed >= cmdRelease2 {
		return encodeCmd(cmdRelease2, c)
	}
	c.ID.AlsoReceived = nil
	return encodeCmd(cmdRelease, c)
}

// errUnknownCmd is decodeCmd's error for a type this binary does not know.
var errUnknownCmd = errors.New("unknown command type")

// decodeCmd splits a log entry into its type and a decoded body.
func decodeCmd(data []byte) (cmdType, any, error) {
	if len(data) == 0 {
		return 0, nil, fmt.Errorf("empty command")
	}
	t := cmdType(data[0])
	var body any
	switch t {
	case cmdAcquire, cmdAcquire2, cmdAcquire3, cmdAcquire4, cmdAcquire5, cmdAcquire6, cmdAcquire7, cmdAcquire8, cmdWithdraw, cmdAcquire9:
		body = &acquireCmd{}
	case cmdRelease, cmdRelease2, cmdRelease3, cmdRelease4, cmdRelease5, cmdRelease6, cmdRelease7:
		body = &releaseCmd{}
	case cmdEndDelay, cmdEndDelay2:
		body = &endDelayCmd{}
	case cmdEndGrant, cmdEndGrant2:
		body = &endGrantCmd{}
	case cmdExpireSession, cmdExpireSession2, cmdExpireSession3:
		body = &expireSessionCmd{}
	case cmdProclaim:
		body = &proclaimCmd{}
	case cmdRevoke, cmdRevoke2:
		body = &revokeCmd{}
	case cmdCloseSession, cmdCloseSession2:
		body = &closeSessionCmd{}
	case cmdRegisterNode:
		body = &registerNodeCmd{}
	case cmdAcquireB, cmdReleaseB:
		body, err := decodeBinary(t, data[1:])
		if err != nil {
			return t, nil, fmt.Errorf("decoding %v command: %w", t, err)
		}
		return t, body, nil
	default:
		return t, nil, fmt.Errorf("%w %d", errUnknownCmd, uint8(t))
	}
	if err := json.Unmarshal(data[1:], body); err != nil {
		return t, nil, fmt.Errorf("decoding %v command: %w", t, err)
	}
	return t, body, nil
}

// acquireResult is what the FSM returns for an Acquire.
type acquireResult struct {
	Granted bool
	// Token is the grant's token; when not granted, the holder's (0 when
	// the lease is free), or with Ended the token of the request's own
	// grant that has ended.
	Token uint64
	// Delayed, not granted, says nobody holds the lease but it is in the
	// lock-delay of its grant Token, which ended without a release.
	Delayed bool
	// Ended answers a retry of an Acquire that was granted (Token) and
	// whose grant has since ended (released, expired, or replaced): the
	// Acquire took effect, so it is not a refusal, and the lease is not
	// this caller's any more. Nothing changed.
	Ended bool
	// TTL is the term stored with the grant (granted only).
	TTL time.Duration
	// HolderName is the identity name of the holder's session when not
	// granted ("" for a session opened before ownership was recorded).
	// The holder's session and owner ids are never told.
	HolderName string
	// Limit is the limit in force for the lease (1: exclusive), Holders
	// how many grants of it stand after the entry.
	Limit, Holders int
	// Final marks a refusal that is the request's outcome, remembered in
	// the FSM (outcome.go): waiting or retrying changes nothing.
	Final bool
	// Shared says the name is held shared after the entry (shared.go):
	// a granted Acquire's grant is shared; a refusal's holders or
	// delays are.
	Shared bool
}

// releaseResult is what the FSM returns for a Release.
type releaseResult struct {
	Released bool
	// Next is the outcome of the attached waiter's Acquire, if any.
	Next *handoff
}

// revokeResult is what the FSM returns for a Revoke.
type revokeResult struct {
	Revoked bool
}
