package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// requestFields are the keys a request object may have, spelled exactly.
var requestFields = map[string]bool{
	"id": true, "op": true, "lease": true, "ttl_ms": true, "wait_ms": true,
	"owner": true, "owner_pid": true,
}

// DecodeRequest parses and checks one request line. It is strict where
// encoding/json is lenient: keys must be spelled exactly (no case folding),
// appear once, and be known; the text must be valid UTF-8; numbers must fit
// their fields. On failure it returns the request id if it could be read,
// and an *Error.
func DecodeRequest(line []byte) (*Request, *uint64, *Error) {
	if !utf8.Valid(line) {
		return nil, nil, Errorf(CodeBadJSON, "request is not valid UTF-8")
	}
	if err := checkKeys(line); err != nil {
		return nil, readID(line), err
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return nil, readID(line), Errorf(CodeBadRequest, "field %q: %s does not fit %s", ute.Field, ute.Value, ute.Type)
		}
		return nil, readID(line), Errorf(CodeBadJSON, "%v", err)
	}
	id := req.ID
	if err := req.validate(); err != nil {
		return nil, &id, err
	}
	return &req, &id, nil
}

// checkKeys walks the top-level object's keys.
func checkKeys(line []byte) *Error {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return Errorf(CodeBadJSON, "not JSON: %v", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return Errorf(CodeBadJSON, "a request is a JSON object, one a line")
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return Errorf(CodeBadJSON, "not JSON: %v", err)
		}
		key := tok.(string)
		if !requestFields[key] {
			return Errorf(CodeBadRequest, "unknown field %q (field names are lower case, as in PROTOCOL.md)", key)
		}
		if seen[key] {
			return Errorf(CodeBadRequest, "field %q appears twice", key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return Errorf(CodeBadJSON, "not JSON: %v", err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return Errorf(CodeBadJSON, "not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(CodeBadJSON, "trailing data after the request object")
	}
	if !seen["id"] {
		return Errorf(CodeBadRequest, "missing field \"id\"")
	}
	if !seen["op"] {
		return Errorf(CodeBadRequest, "missing field \"op\"")
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

// Limits on request values, checked before any handler runs.
const (
	maxTTLMs  = 24 * 60 * 60 * 1000 // a day
	maxWaitMs = 60 * 60 * 1000      // an hour
)

func (r *Request) validate() *Error {
	switch r.Op {
	case OpHello, OpStatus:
		if r.Lease != "" || r.TTLMs != 0 || r.WaitMs != 0 || r.Owner != "" || r.OwnerPID != 0 {
			return Errorf(CodeBadRequest, "%s takes no fields besides id and op", r.Op)
		}
	case OpRelease:
		if r.TTLMs != 0 || r.WaitMs != 0 || r.Owner != "" || r.OwnerPID != 0 {
			return Errorf(CodeBadRequest, "release takes only id, op and lease")
		}
		return validateName(r.Lease)
	case OpAcquire:
		if err := validateName(r.Lease); err != nil {
			return err
		}
		if r.TTLMs <= 0 || r.TTLMs > maxTTLMs {
			return Errorf(CodeInvalidTTL, "ttl_ms must be 1 to %d, got %d", maxTTLMs, r.TTLMs)
		}
		if r.WaitMs < 0 || r.WaitMs > maxWaitMs {
			return Errorf(CodeBadRequest, "wait_ms must be 0 to %d, got %d", maxWaitMs, r.WaitMs)
		}
		switch r.Owner {
		case "", OwnerConnection, OwnerDetached:
			if r.OwnerPID != 0 {
				return Errorf(CodeBadRequest, "owner_pid is only for owner \"pid\"")
			}
		case OwnerPID:
			if r.OwnerPID <= 0 {
				return Errorf(CodeBadRequest, "owner \"pid\" needs a positive owner_pid")
			}
		default:
			return Errorf(CodeBadRequest, "owner must be %q, %q or %q, got %q", OwnerConnection, OwnerPID, OwnerDetached, r.Owner)
		}
	case "":
		return Errorf(CodeBadRequest, "op is empty")
	default:
		return Errorf(CodeUnknownOp, "unknown op %q", r.Op)
	}
	return nil
}
