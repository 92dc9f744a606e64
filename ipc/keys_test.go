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
