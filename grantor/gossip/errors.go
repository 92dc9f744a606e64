package gossip

import (
	"errors"
	"strings"
)

var (
	// ErrGossipKey means the gossip encryption key is wrong or missing: a
	// join failed because this member and the seed disagree about it (it
	// differs, or one side has none), or a key or key file is malformed.
	ErrGossipKey = errors.New("gossip key wrong or missing")
	// ErrNoSeed means Join was given seeds and none of them could be joined.
	ErrNoSeed = errors.New("no gossip seed could be joined")
	// ErrMetaTooLarge means a Meta does not fit memberlist's 512-byte limit.
	ErrMetaTooLarge = errors.New("gossip meta too large")
	// ErrMetaVersion means a member gossips a metadata encoding version
	// this build does not know.
	ErrMetaVersion = errors.New("unknown gossip meta version")
	// ErrMetaMalformed means a member's metadata could not be parsed.
	ErrMetaMalformed = errors.New("malformed gossip meta")
	// ErrLeft means the member has left the cluster (Leave).
	ErrLeft = errors.New("gossip member has left")
	// ErrShutdown means the member has been shut down.
	ErrShutdown = errors.New("gossip member is shut down")
)

// keyProblem is one way memberlist reports an encryption mismatch, and
// what it means for the operator.
type keyProblem struct {
	phrase  string // as memberlist words it (lower-cased)
	explain string
}

// memberlist v0.7.0 returns these as plain fmt.Errorf strings, wrapped in a
// go-multierror, so matching their text is the only way to recognise them;
// the tests pin each one by provoking it. A seed that cannot decrypt a
// joiner's state answers with an error message encrypted with its own key
// (or in clear text when it has none), which is how each case reaches the
// joiner.
var keyProblems = []keyProblem{
	{"no installed keys could decrypt the message",
		"this member's gossip key does not match the cluster's"},
	{"remote state is encrypted and encryption is not configured",
		"the cluster uses a gossip key and this member has none"},
	{"encryption is configured but remote state is not encrypted",
		"this member has a gossip key and the seed uses none"},
}

// classifyKeyError returns the explanation of the first key problem that
// err (or a log line) mentions, or "".
func classifyKeyError(text string) string {
	text = strings.ToLower(text)
	for _, p := range keyProblems {
		if strings.Contains(text, p.phrase) {
			return p.explain
		}
	}
	return ""
}
