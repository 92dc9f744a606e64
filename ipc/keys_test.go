package ipc

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzScanKeys: on every line it takes, the hand walk of a request's keys
// finds what encoding/json's tokens find: the same keys, or the same
// error (code and message); and when it typed the values, the request is
// the one encoding/json decodes.
func FuzzScanKeys(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"op":"hello"}`,
		` { "id" : 2 , "op" : "acquire" , "lease" : "jobs/render-42" , "ttl_ms" : 15000 } `,
		`{"id":3,"op":"check","lease":"a\"b\\c","token":"1"}`,
		`{"id":4,"op":"status","op":"status"}`,
		`{"id":5,"op":"status","lease":null}`,
		`{"id":6,"op":"status","x":{"a":[1,{"b":"}"}]}}`,
		`{"ID":7,"op":"status"}`,
		`{"op":"status"}`,
		`{}`,
		`{"id":8,"op":"st\u0061tus","\u006fwner":"pid"}`,
		`{"id":[1,2],"op":true,"wait_ms":-1.5e3}`,
		`{"id":9,"op":"acquire","lease":"sem","ttl_ms":1000,"limit":3,"value":"v","no_renew":false,"holders":true,"owner_pid":-0,"lock_delay_ms":9223372036854775807}`,
		`{"id":10,"op":"acquire","ttl_ms":1e3,"wait_ms":1.0,"lease":"a\u0062"}`,
		`{"id":-0,"op":"status"}`,
		`{"id":18446744073709551616,"op":"status"}`,
		`[]`, `"x"`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if !json.Valid(line) {
			return
		}
		var req Request
		seen, typed, err, ok := scanKeys(line, &req)
		if !ok {
			return
		}
		want, werr := decodeKeys(line)
		if (err == nil) != (werr == nil) || (err != nil && *err != *werr) {
			t.Fatalf("%q: scanKeys error %v, decodeKeys error %v", line, err, werr)
		}
		if err == nil && seen != want {
			t.Fatalf("%q: scanKeys found %v, decodeKeys %v", line, seen, want)
		}
		if err == nil && typed {
			var wantReq Request
			if uerr := unmarshalRequest(line, &wantReq); uerr != nil || !reflect.DeepEqual(req, wantReq) {
				t.Fatalf("%q: scanKeys typed %+v, encoding/json %+v (%v)", line, req, wantReq, uerr)
			}
		}
	})
}

// FuzzPlainObject: a line plainObject accepts is valid JSON (scanKeys
// then walks it without json.Valid), and the lines every client writes
// are accepted.
func FuzzPlainObject(f *testing.F) {
	for _, c := range []struct {
		line  string
		plain bool
	}{
		{line: `{"id":1,"op":"status"}`, plain: true},
		{line: ` { "id" : 2 , "op" : "acquire" , "lease" : "jobs/render-42" , "ttl_ms" : 15000 } ` + "\r\n\t", plain: true},
		{line: `{"id":3,"op":"acquire","lease":"a","ttl_ms":1000,"no_renew":false,"shared":true,"x":null,"n":-0.5e+3,"m":1E9,"ü":"ü"}`, plain: true},
		{line: `{}`, plain: true},
		{line: `{"id":4,"op":"check","lease":"a\"b","token":"1"}`},
		{line: `{"id":5,"x":{"a":1}}`},
		{line: `{"id":[1]}`},
		{line: `{"id":01}`}, {line: `{"id":1.}`}, {line: `{"id":1e}`}, {line: `{"id":-}`}, {line: `{"id":.5}`},
		{line: `{"id":tru}`}, {line: `{"id":truex}`}, {line: `{"id":nul}`},
		{line: `{"id":1,}`}, {line: `{"id":1` + "}x"}, {line: `{"id" 1}`}, {line: `{id:1}`}, {line: `{"id":1`},
		{line: "{\"id\":\"a\x01\"}"}, {line: "{\"id\":1}\v"}, {line: `[]`}, {line: `"x"`}, {line: ``},
	} {
		if got := plainObject([]byte(c.line)); got != c.plain {
			f.Fatalf("plainObject(%q) = %v, want %v", c.line, got, c.plain)
		}
		f.Add([]byte(c.line))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if plainObject(line) && !json.Valid(line) {
			t.Fatalf("plainObject accepted %q, which is not JSON", line)
		}
	})
}
