package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
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

// A fieldSet holds which of a request's keys a line had: one bit for each
// key of requestFields, so that a request's keys are kept without a map.
type fieldSet uint32

// requestFields are the keys a request object may have, spelled exactly,
// each with its bit in a fieldSet; fieldNames names the bits, in order.
var (
	requestFields = map[string]fieldSet{}
	fieldNames    []string
)

// The bits of the keys validate looks at, set by init: a request is
// checked without a map lookup a key.
var fieldID, fieldOp, fieldLease, fieldTTL, fieldToken, fieldOwnerPID, fieldResume, fieldLimit fieldSet

// An opSpec is opFields' entry for an op as fieldSets: allowed holds id
// and op too, required the keys of required (whose order names the
// first one missing).
type opSpec struct {
	allowed, requiredSet fieldSet
	required             []string
}

// opSpecs holds opFields as opSpecs, made by init.
var opSpecs = map[string]opSpec{}

// opNames maps each op to itself, so that an op read from a line is kept
// without a copy.
var opNames = map[string]string{}

func init() {
	add := func(k string) fieldSet {
		if _, ok := requestFields[k]; !ok {
			requestFields[k] = 1 << len(fieldNames)
			fieldNames = append(fieldNames, k)
		}
		return requestFields[k]
	}
	fieldID, fieldOp = add("id"), add("op")
	for _, op := range slices.Sorted(maps.Keys(opFields)) {
		opNames[op] = op
		spec := opSpec{allowed: fieldID | fieldOp, required: opFields[op].required}
		for _, k := range opFields[op].allowed {
			spec.allowed |= add(k)
		}
		for _, k := range spec.required {
			bit := requestFields[k]
			if bit == 0 || spec.allowed&bit == 0 {
				// Its check would be skipped: a key without a bit is never
				// missing.
				panic("ipc: op " + op + " requires " + k + ", which it does not allow")
			}
			spec.requiredSet |= bit
		}
		opSpecs[op] = spec
	}
	if len(fieldNames) > 32 {
		panic("ipc: more request fields than a fieldSet holds")
	}
	fieldLease, fieldTTL, fieldToken = requestFields["lease"], requestFields["ttl_ms"], requestFields["token"]
	fieldOwnerPID, fieldResume, fieldLimit = requestFields["owner_pid"], requestFields["resume"], requestFields["limit"]
}

// has reports whether the set holds the key name.
func (s fieldSet) has(name string) bool { return s&requestFields[name] != 0 }

// names returns the keys in s, sorted.
func (s fieldSet) names() []string {
	var out []string
	for i, k := range fieldNames {
		if s&(1<<i) != 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// DecodeRequest parses and checks one request line. It is strict where
// encoding/json is lenient: keys must be spelled exactly (no case folding),
// appear once, be known and be allowed for the op; the text must be valid
// UTF-8; numbers must fit their fields and their ranges. On failure it
// returns the request id if it could be read, and an *Error. Terms are
// checked against the protocol's bounds, 1ms to 24h (Server narrows them
// to its own).
func DecodeRequest(line []byte) (*Request, *uint64, *Error) {
	req := new(Request)
	id, err := decodeRequest(line, MinTTL, MaxTTL, req)
	if err != nil {
		return nil, id, err
	}
	return req, id, nil
}

// decodeRequest is DecodeRequest into *req, which it overwrites; the id
// it returns on success is &req.ID.
func decodeRequest(line []byte, minTTL, maxTTL time.Duration, req *Request) (*uint64, *Error) {
	*req = Request{}
	if !utf8.Valid(line) {
		return nil, Errorf(CodeBadJSON, "request is not valid UTF-8")
	}
	seen, typed, err := checkKeys(line, req)
	if err != nil {
		return readID(line), err
	}
	if !typed {
		*req = Request{}
		if err := unmarshalRequest(line, req); err != nil {
			return readID(line), err
		}
	}
	if err := req.validate(seen, minTTL, maxTTL); err != nil {
		id := req.ID
		return &id, err
	}
	return &req.ID, nil
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
// a client library writes, is walked by scanKeys without a decoder (and,
// when plainObject knows it valid, without json.Valid's look first), which
// also fills req when every value is of its field's plain form (typed);
// any other line goes through encoding/json's tokens, which also name
// what is wrong with it, and is not typed.
func checkKeys(line []byte, req *Request) (seen fieldSet, typed bool, _ *Error) {
	if plainObject(line) || json.Valid(line) {
		if seen, typed, err, ok := scanKeys(line, req); ok {
			return seen, typed, err
		}
	}
	seen, err := decodeKeys(line)
	return seen, false, err
}

// decodeKeys is checkKeys through encoding/json's tokens.
func decodeKeys(line []byte) (fieldSet, *Error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return 0, Errorf(CodeBadJSON, "not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return 0, Errorf(CodeBadJSON, "a request is a JSON object, one a line")
	}
	var seen fieldSet
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return 0, Errorf(CodeBadJSON, "not JSON: %v", err)
		}
		key := tok.(string)
		bit, known := requestFields[key]
		if !known {
			return 0, Errorf(CodeBadRequest, "unknown field %q (field names are lower case, as in PROTOCOL.md)", key)
		}
		if seen&bit != 0 {
			return 0, Errorf(CodeBadRequest, "field %q appears twice", key)
		}
		seen |= bit
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return 0, Errorf(CodeBadJSON, "not JSON: %v", err)
		}
		if string(v) == "null" {
			return 0, Errorf(CodeBadRequest, "field %q is null; leave it out instead", key)
		}
	}
	if _, err := dec.Token(); err != nil {
		return 0, Errorf(CodeBadJSON, "not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, Errorf(CodeBadJSON, "trailing data after the request object")
	}
	return seen, missingIDOrOp(seen)
}

// missingIDOrOp is the error for a request object without id or op.
func missingIDOrOp(seen fieldSet) *Error {
	switch {
	case seen&fieldID == 0:
		return Errorf(CodeBadRequest, "missing field %q", "id")
	case seen&fieldOp == 0:
		return Errorf(CodeBadRequest, "missing field %q", "op")
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

func (r *Request) validate(seen fieldSet, minTTL, maxTTL time.Duration) *Error {
	f, ok := opSpecs[r.Op]
	if !ok {
		if r.Op == "" {
			return Errorf(CodeBadRequest, "op is empty")
		}
		return Errorf(CodeUnknownOp, "unknown op %q", r.Op)
	}
	if extra := seen &^ f.allowed; extra != 0 {
		names := extra.names()
		for i, k := range names {
			names[i] = strconv.Quote(k)
		}
		return Errorf(CodeBadRequest, "%s does not take %s", r.Op, strings.Join(names, ", "))
	}
	for _, k := range f.required {
		if seen&f.requiredSet != f.requiredSet && !seen.has(k) {
			return Errorf(CodeBadRequest, "%s needs field %q", r.Op, k)
		}
	}
	if seen&fieldLease != 0 {
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
	if seen&fieldTTL != 0 && (r.TTLMs < minTTL.Milliseconds() || r.TTLMs > maxTTL.Milliseconds()) {
		return TTLError(r.TTLMs, minTTL, maxTTL)
	}
	if r.WaitMs < 0 || r.WaitMs > MaxWait.Milliseconds() {
		return Errorf(CodeBadRequest, "wait_ms must be 0 to %d, got %d", MaxWait.Milliseconds(), r.WaitMs)
	}
	if r.LockDelayMs < 0 || r.LockDelayMs > MaxLockDelay.Milliseconds() {
		return Errorf(CodeBadRequest, "lock_delay_ms must be 0 to %d, got %d", MaxLockDelay.Milliseconds(), r.LockDelayMs)
	}
	if seen&fieldToken != 0 {
		if _, err := strconv.ParseUint(r.Token, 10, 64); err != nil || len(r.Token) > maxTokenLen {
			return Errorf(CodeBadRequest, "token must be a decimal string of an unsigned 64-bit integer, got %q", r.Token)
		}
	}
	switch r.Owner {
	case "", OwnerConnection, OwnerDetached:
		if seen&fieldOwnerPID != 0 {
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
	if seen&fieldResume != 0 && !validSecret(r.Resume) {
		return Errorf(CodeBadRequest, "resume must be the %d hex digits of a grant's resume secret, got %d characters", resumeSecretLen, len(r.Resume))
	}
	return r.validatePrims(seen)
}
