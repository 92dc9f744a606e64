package ipc

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// filler sets values by reflection, so that a field added to a reply or
// event type is filled too, and the hand encoder must know it.
type filler struct {
	r *rand.Rand
	// full sets every field, pointer and slice (no zero values).
	full bool
}

var (
	fillStrings = []string{"jobs/render-42", "a", "18446744073709551615", "x<y>&z", "quote\" back\\slash", "tab\tnew\nline\x01", "é, ü, ☃", "line\u2028sep", "bad\xffutf8", "2026-12-01T04:50:00.123456789Z"}
	fillInts    = []int64{1, -1, 42, 15000, -86400000, math.MaxInt64, math.MinInt64, 1 << 53}
	fillFloats  = []float64{1, -1, 0.5, 1.5e-7, -3.25e-10, 1e21, 123456789.125, 50, 1e-6, 999999999999999999999.0, 4.9e-324}
)

func (f *filler) zero() bool { return !f.full && f.r.IntN(3) == 0 }

func (f *filler) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		if !f.zero() {
			v.SetString(fillStrings[f.r.IntN(len(fillStrings))])
		}
	case reflect.Int, reflect.Int64:
		if !f.zero() {
			v.SetInt(fillInts[f.r.IntN(len(fillInts))])
		}
	case reflect.Uint64:
		if !f.zero() {
			v.SetUint(uint64(fillInts[f.r.IntN(len(fillInts))]))
		}
	case reflect.Float64:
		if !f.zero() {
			v.SetFloat(fillFloats[f.r.IntN(len(fillFloats))])
		}
	case reflect.Bool:
		v.SetBool(f.full || f.r.IntN(2) == 0)
	case reflect.Pointer:
		if f.zero() {
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem())
		v.Set(p)
	case reflect.Slice:
		if f.zero() {
			if f.r.IntN(2) == 0 {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		n := 1 + f.r.IntN(3)
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i))
		}
		v.Set(s)
	case reflect.Struct:
		for i := range v.NumField() {
			f.fill(v.Field(i))
		}
	default:
		panic("encode_test: no filler for " + v.Type().String())
	}
}

// sameAsJSON fails unless marshalLine encodes v as encoding/json does.
func sameAsJSON(t *testing.T, v any) {
	t.Helper()
	want, werr := json.Marshal(v)
	got, gerr := marshalLine(v)
	if (werr != nil) != (gerr != nil) {
		t.Fatalf("encoding/json error %v, marshalLine error %v, for %+v", werr, gerr, v)
	}
	if werr != nil {
		return
	}
	if !bytes.Equal(got, append(want, '\n')) {
		t.Fatalf("marshalLine:\n%s\nencoding/json:\n%s", got, want)
	}
}

// The hand encoder writes every reply and event byte for byte as
// encoding/json does: with every field set (a field the encoder does not
// know fails here), and with thousands of mixes of set and zero fields,
// nil and empty slices, escapes, HTML characters and non-ASCII text.
func TestMarshalLineMatchesEncodingJSON(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[Response](), reflect.TypeFor[Event]()} {
		f := filler{r: rand.New(rand.NewPCG(1, 2)), full: true}
		for range 50 {
			v := reflect.New(typ)
			f.fill(v.Elem())
			sameAsJSON(t, v.Interface())
		}
		f.full = false
		for range 5000 {
			v := reflect.New(typ)
			f.fill(v.Elem())
			sameAsJSON(t, v.Interface())
		}
	}
	for _, x := range []float64{0, math.Copysign(0, -1), 1, -1, 500, -12, 0.5, 1e15, 1<<53 - 1, 1 << 53, -(1 << 53), 1e20, 1e21, 1e-7, math.MaxInt64, math.MinInt64} {
		sameAsJSON(t, &Response{Clock: &ClockStatus{RhoPPM: x, KernelFreqPPM: -x}})
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		sameAsJSON(t, &Response{Clock: &ClockStatus{RhoPPM: x}}) // both refuse
		sameAsJSON(t, &Event{Event: EventDrift, RatePPM: x})
	}
}

// A status reply costs one allocation to encode (its buffer's growth
// aside), against encoding/json's reflection.
func BenchmarkMarshalStatus(b *testing.B) {
	drift := 3.5
	leases := []Grant{*NewGrant("jobs/render-42", 42, 15e9, 2e12, 1e12), *NewGrant("db/primary", 7, 15e9, 2e12, 1e12)}
	id := uint64(1)
	resp := &Response{ID: &id, OK: true, Leases: &leases,
		Clock:   &ClockStatus{KernelSynced: true, KernelFreqPPM: -12.5, DriftPPM: &drift, DriftSamples: 40, RhoPPM: 100, EffectiveRhoPPM: 100, PauseWindowMs: 60000},
		Grantor: &GrantorStatus{LeaderReachable: true, Leader: "127.0.0.1:7401", SinceContactMs: 120, Known: []string{"127.0.0.1:7401", "127.0.0.1:7411", "127.0.0.1:7421"}, FoundBy: "grantors"}}
	b.Run("marshalLine", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := marshalLine(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzEncodeString: the hand encoder writes any string, every byte and
// invalid UTF-8 included, as encoding/json does.
func FuzzEncodeString(f *testing.F) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	for _, s := range []string{"", "plain", string(all), "a\u2028b\u2029c", "é<&>\"\\\b\f\n\r\t\x00\x1f\x7f", "\xff\xfe", "\xe2\x80", "日本語", "ok: 'x' <y> & z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sameAsJSON(t, &Response{Grantor: &GrantorStatus{Error: s, Leader: s, Known: []string{s}}})
	})
}
