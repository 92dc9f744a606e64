package ipc

import (
	"bytes"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// scanKeys is checkKeys for a line that json.Valid accepted: it walks the
// object's keys and values by hand, with the same checks in the same
// order as decodeKeys, and sets each value into req (typed) while every
// one so far had its field's plain form (setField). It reports false,
// leaving the line to decodeKeys, when the line is not an object or a
// key holds an escape or non-ASCII.
func scanKeys(line []byte, req *Request) (seen fieldSet, typed bool, _ *Error, ok bool) {
	i := skipSpace(line, 0)
	if line[i] != '{' {
		return 0, false, nil, false
	}
	typed = true
	i = skipSpace(line, i+1)
	for line[i] != '}' {
		if line[i] == ',' {
			i = skipSpace(line, i+1)
		}
		end := i + 1 + bytes.IndexByte(line[i+1:], '"')
		raw := line[i+1 : end]
		if bytes.IndexByte(raw, '\\') >= 0 || !plainASCII(raw) {
			return 0, false, nil, false
		}
		bit, known := requestFields[string(raw)]
		if !known {
			return 0, false, Errorf(CodeBadRequest, "unknown field %q (field names are lower case, as in PROTOCOL.md)", raw), true
		}
		key := fieldNames[bits.TrailingZeros32(uint32(bit))]
		if seen&bit != 0 {
			return 0, false, Errorf(CodeBadRequest, "field %q appears twice", key), true
		}
		seen |= bit
		i = skipSpace(line, end+1) // at the colon
		i = skipSpace(line, i+1)
		v := i
		i = skipValue(line, i)
		if string(line[v:i]) == "null" {
			return 0, false, Errorf(CodeBadRequest, "field %q is null; leave it out instead", key), true
		}
		typed = typed && setField(req, key, line[v:i])
		i = skipSpace(line, i)
	}
	return seen, typed, missingIDOrOp(seen), true
}

// plainObject reports whether line is a JSON object of the plain form a
// client library writes: no white space but JSON's around its tokens, no
// nesting, keys and string values without escapes or control
// characters, and numbers, true, false or null as the other values. A
// line it accepts is valid JSON (FuzzPlainObject holds it to json.Valid);
// one it does not may be valid too, and json.Valid decides. It costs a
// look at each byte, where json.Valid's state machine costs a call.
func plainObject(line []byte) bool {
	i := skipSpace(line, 0)
	if i == len(line) || line[i] != '{' {
		return false
	}
	if i = skipSpace(line, i+1); i < len(line) && line[i] == '}' {
		return skipSpace(line, i+1) == len(line)
	}
	for {
		if i = plainStringEnd(line, i); i < 0 {
			return false
		}
		if i = skipSpace(line, i); i == len(line) || line[i] != ':' {
			return false
		}
		if i = plainValueEnd(line, skipSpace(line, i+1)); i < 0 {
			return false
		}
		if i = skipSpace(line, i); i == len(line) {
			return false
		}
		switch line[i] {
		case ',':
			i = skipSpace(line, i+1)
		case '}':
			return skipSpace(line, i+1) == len(line)
		default:
			return false
		}
	}
}

// plainStringEnd returns the index just past the string that starts at
// b[i], or -1 when there is none there, or it holds an escape or a
// control character.
func plainStringEnd(b []byte, i int) int {
	if i == len(b) || b[i] != '"' {
		return -1
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\' || c < 0x20:
			return -1
		}
	}
	return -1
}

// plainValueEnd returns the index just past the value that starts at
// b[i], a plain string, a number, true, false or null, or -1.
func plainValueEnd(b []byte, i int) int {
	if i == len(b) {
		return -1
	}
	lit := ""
	switch b[i] {
	case '"':
		return plainStringEnd(b, i)
	case 't':
		lit = "true"
	case 'f':
		lit = "false"
	case 'n':
		lit = "null"
	default:
		return numberEnd(b, i)
	}
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// numberEnd returns the index just past the JSON number that starts at
// b[i] (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), or -1.
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digitsEnd(b, i)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		if j := digitsEnd(b, i+1); j > i+1 {
			i = j
		} else {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digitsEnd(b, i); j > i {
			i = j
		} else {
			return -1
		}
	}
	return i
}

// digitsEnd returns the index of the first byte at or after i that is
// not a decimal digit.
func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// plainASCII reports whether b is all ASCII (encoding/json would replace
// invalid UTF-8 in a key it names in an error).
func plainASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// skipSpace returns the index of the first byte at or after i that is
// not JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value that starts at i,
// in a line json.Valid accepted.
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i++
			for b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			if depth--; depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// setField sets field key of req from raw, a JSON value, and reports
// true, when raw has the plain form of the field's type (a string without
// escapes, a decimal integer that fits, true or false); for any other
// value, or a field it does not know, it reports false and encoding/json
// decodes the line, as it would have.
func setField(req *Request, key string, raw []byte) bool {
	var ok bool
	switch key {
	case "id":
		req.ID, ok = plainUint(raw)
	case "op":
		req.Op, ok = plainOp(raw)
	case "lease":
		req.Lease, ok = plainString(raw)
	case "owner":
		req.Owner, ok = plainString(raw)
	case "token":
		req.Token, ok = plainString(raw)
	case "resume":
		req.Resume, ok = plainString(raw)
	case "value":
		var v string
		if v, ok = plainString(raw); ok {
			req.Value = &v
		}
	case "ttl_ms":
		req.TTLMs, ok = plainInt(raw)
	case "wait_ms":
		req.WaitMs, ok = plainInt(raw)
	case "lock_delay_ms":
		req.LockDelayMs, ok = plainInt(raw)
	case "owner_pid":
		var v int64
		v, ok = plainInt(raw)
		req.OwnerPID = int(v)
	case "limit":
		var v int64
		v, ok = plainInt(raw)
		req.Limit = int(v)
	case "no_renew":
		req.NoRenew, ok = plainBool(raw)
	case "shared":
		req.Shared, ok = plainBool(raw)
	case "holders":
		req.Holders, ok = plainBool(raw)
	}
	return ok
}

// plainString is a JSON string of valid UTF-8 without escapes.
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw) {
		return "", false
	}
	return string(raw[1 : len(raw)-1]), true
}

// plainOp is plainString for an op: a known op is not copied (opNames).
func plainOp(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' {
		if op, ok := opNames[string(raw[1:len(raw)-1])]; ok {
			return op, true
		}
	}
	return plainString(raw)
}

// plainInt is a JSON integer without fraction or exponent that fits an
// int64 (int is 64 bits wide where leaseside runs).
func plainInt(raw []byte) (int64, bool) {
	if bytes.ContainsAny(raw, ".eE") {
		return 0, false
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	return v, err == nil
}

// plainUint is a JSON integer without sign, fraction or exponent that
// fits a uint64.
func plainUint(raw []byte) (uint64, bool) {
	if bytes.ContainsAny(raw, ".eE-") {
		return 0, false
	}
	v, err := strconv.ParseUint(string(raw), 10, 64)
	return v, err == nil
}

// plainBool is true or false.
func plainBool(raw []byte) (bool, bool) {
	switch string(raw) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}
