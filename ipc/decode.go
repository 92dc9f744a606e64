package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// opFields lists, per op, the fields a request may carry besides id and op,
// and which of them it must carry.
var opFields = map[string]struct{ allowed, required []string }{
	OpHello:    {},
	OpStatus:   {},
	OpAcquire:  {allowed: []string{"lease", "ttl_ms", "wait_ms", "owner", "owner_pid", "lock_delay_ms", "no_renew", "limit", "shared"}, required: []string{"lease", "ttl_ms"}},
	OpRelease:  {allowed: []string{"lease", "token", "reason"}, required: []string{"lease"}},
	OpRenew:    {allowed: []string{"lease", "token"}, required: []string{"lease"}},
	OpCheck:    {allowed: []string{"lease", "token"}, required: []string{"lease"}},
	OpWatch:    {allowed: []string{"lease", "holders"}},
	OpClock:    {},
	OpMembers:  {},
	OpResetRho: {},
	OpLeases:   {allowed: []string{"prefix", "after"}},
	// Protocol 3 (prims.go).
	OpElect:      {allowed: []string{"lease", "ttl_ms", "wait_ms", "owner", "owner_pid", "lock_delay_ms", "value"}, required: []string{"lease", "ttl_ms", "value"}},
	OpProclaim:   {allowed: []string{"lease", "token", "value"}, required: []string{"lease", "value"}},
	OpResign:     {allowed: []string{"lease", "token"}, required: []string{"lease"}},
	OpObserve:    {allowed: []string{"lease"}, required: []string{"lease"}},
	OpCheckToken: {allowed: []string{"lease", "token"}, required: []string{"lease", "token"}},
	// Restarts (resume.go).
	OpResume: {allowed: []string{"lease", "token", "resume"}, required: []string{"lease", "token", "resume"}},
}

// requestFields are the keys a request object may have, spelled exactly;
// each maps to itself, so that a key read from a line is kept without a
// copy.
var requestFields = map[string]string{"id": "id", "op": "op"}

func init() {
	for _, f := range opFields {
		for _, k := range f.allowed {
			requestFields[k] = k
		}
	}
}

// DecodeRequest parses and checks one request line. It is strict where
// encoding/json is lenient: keys must be spelled exactly (no case folding),
// appear once, be known and be allowed for the op; the text must be valid
// UTF-8; numbers must fit their fields and their ranges. On failure it
// returns the request id if it could be read, and an *Error. Terms are
// checked against the protocol's bounds, 1ms to 24h (Server narrows them
// to its own).
func DecodeRequest(line []byte) (*Request, *uint64, *Error) {
	return decodeRequest(line, MinTTL, MaxTTL)
}

func decodeRequest(line []byte, minTTL, maxTTL time.Duration) (*Request, *uint64, *Error) {
	if !utf8.Valid(line) {
		return nil, nil, Errorf(CodeBadJSON, "request is not valid UTF-8")
	}
	var req Request
	seen, typed, err := checkKeys(line, &req)
	if err != nil {
		return nil, readID(line), err
	}
	if !typed {
		req = Request{}
		if err := unmarshalRequest(line, &req); err != nil {
			return nil, readID(line), err
		}
	}
	id := req.ID
	if err := req.validate(seen, minTTL, maxTTL); err != nil {
		return nil, &id, err
	}
	return &req, &id, nil
}

// unmarshalRequest decodes line into req with encoding/json.
func unmarshalRequest(line []byte, req *Request) *Error {
	err := json.Unmarshal(line, req)
	if err == nil {
		return nil
	}
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		return Errorf(CodeBadRequest, "field %q: %s does not fit %s", ute.Field, ute.Value, ute.Type)
	}
	return Errorf(CodeBadJSON, "%v", err)
}

// checkKeys walks the top-level object's keys and returns them. A line
// that is valid JSON with no escape in its keys, which is every request
// a client library writes, is walked by scanKeys without a decoder, which
// also fills req when every value is of its field's plain form (typed);
// any other line goes through encoding/json's tokens, which also name
// what is wrong with it, and is not typed.
func checkKeys(line []byte, req *Request) (seen map[string]bool, typed bool, _ *Error) {
	if json.Valid(line) {
		if seen, typed, err, ok := scanKeys(line, req); ok {
			return seen, typed, err
		}
	}
	seen, err := decodeKeys(line)
	return seen, false, err
}

// decodeKeys is checkKeys through encoding/json's tokens.
func decodeKeys(line []byte) (map[string]bool, *Error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, Errorf(CodeBadJSON, "not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, Errorf(CodeBadJSON, "a request is a JSON object, one a line")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, Errorf(CodeBadJSON, "not JSON: %v", err)
		}
		key := tok.(string)
		if requestFields[key] == "" {
			return nil, Errorf(CodeBadRequest, "unknown field %q (field names are lower case, as in PROTOCOL.md)", key)
		}
		if seen[key] {
			return nil, Errorf(CodeBadRequest, "field %q appears twice", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, Errorf(CodeBadJSON, "not JSON: %v", err)
		}
		if string(v) == "null" {
			return nil, Errorf(CodeBadRequest, "field %q is null; leave it out instead", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, Errorf(CodeBadJSON, "not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, Errorf(CodeBadJSON, "trailing data after the request object")
	}
	return seen, missingIDOrOp(seen)
}

// missingIDOrOp is the error for a request object without id or op.
func missingIDOrOp(seen map[string]bool) *Error {
	for _, k := range []string{"id", "op"} {
		if !seen[k] {
			return Errorf(CodeBadRequest, "missing field %q", k)
		}
	}
	return nil
}

// readID recovers the id of a request that failed strict decoding, so
// the error can still be matched to it.
func readID(line []byte) *uint64 {
	var v struct {
		ID *uint64 `json:"id"`
	}
	if json.Unmarshal(line, &v) != nil {
		return nil
	}
	return v.ID
}

// The protocol's bounds on request values, checked before any handler
// runs. A daemon may narrow the term's (its MinTTL and MaxTTL, given to
// Server).
const (
	MinTTL       = time.Millisecond
	MaxTTL       = 24 * time.Hour
	MaxWait      = time.Hour
	MaxLockDelay = time.Hour
)

const maxTokenLen = 20 // digits in 2^64-1

func (r *Request) validate(seen map[string]bool, minTTL, maxTTL time.Duration) *Error {
	f, ok := opFields[r.Op]
	if !ok {
		if r.Op == "" {
			return Errorf(CodeBadRequest, "op is empty")
		}
		return Errorf(CodeUnknownOp, "unknown op %q", r.Op)
	}
	var extra []string
	for k := range seen {
		if k != "id" && k != "op" && !slices.Contains(f.allowed, k) {
			extra = append(extra, strconv.Quote(k))
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return Errorf(CodeBadRequest, "%s does not take %s", r.Op, strings.Join(extra, ", "))
	}
	for _, k := range f.required {
		if !seen[k] {
			return Errorf(CodeBadRequest, "%s needs field %q", r.Op, k)
		}
	}
	if seen["lease"] {
		if err := validateName(r.Lease); err != nil {
			return err
		}
	}
	if err := validatePrefix("prefix", r.Prefix); err != nil {
		return err
	}
	if err := validatePrefix("after", r.After); err != nil {
		return err
	}
	if seen["ttl_ms"] && (r.TTLMs < minTTL.Milliseconds() || r.TTLMs > maxTTL.Milliseconds()) {
		return TTLError(r.TTLMs, minTTL, maxTTL)
	}
	if r.WaitMs < 0 || r.WaitMs > MaxWait.Milliseconds() {
		return Errorf(CodeBadRequest, "wait_ms must be 0 to %d, got %d", MaxWait.Milliseconds(), r.WaitMs)
	}
	if r.LockDelayMs < 0 || r.LockDelayMs > MaxLockDelay.Milliseconds() {
		return Errorf(CodeBadRequest, "lock_delay_ms must be 0 to %d, got %d", MaxLockDelay.Milliseconds(), r.LockDelayMs)
	}
	if seen["token"] {
		if _, err := strconv.ParseUint(r.Token, 10, 64); err != nil || len(r.Token) > maxTokenLen {
			return Errorf(CodeBadRequest, "token must be a decimal string of an unsigned 64-bit integer, got %q", r.Token)
		}
	}
	switch r.Owner {
	case "", OwnerConnection, OwnerDetached:
		if seen["owner_pid"] {
			return Errorf(CodeBadRequest, "owner_pid is only for owner %q", OwnerPID)
		}
	case OwnerPID:
		if r.OwnerPID <= 0 {
			return Errorf(CodeBadRequest, "owner %q needs a positive owner_pid", OwnerPID)
		}
	default:
		return Errorf(CodeBadRequest, "owner must be %q, %q or %q, got %q", OwnerConnection, OwnerPID, OwnerDetached, r.Owner)
	}
	if r.Reason != "" && r.Reason != ReasonRenewFailed {
		return Errorf(CodeBadRequest, "reason must be absent or %q, got %q", ReasonRenewFailed, r.Reason)
	}
	if r.NoRenew && r.Owner != OwnerDetached {
		return Errorf(CodeBadRequest, "no_renew is only for owner %q", OwnerDetached)
	}
	if seen["resume"] && !validSecret(r.Resume) {
		return Errorf(CodeBadRequest, "resume must be the %d hex digits of a grant's resume secret, got %d characters", resumeSecretLen, len(r.Resume))
	}
	return r.validatePrims(seen)
}
