package ipc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"
)

// The socket's hot lines (replies and events) are encoded here without
// reflection, into one buffer: the same bytes as encoding/json writes for
// these types (encode_test.go holds the two to it, field by field), at a
// fraction of the allocations.

// marshalLine encodes a reply or an event as one line, newline included,
// in a slice of its own length: a queued line holds no more memory than
// it counts for against its connection's budget. It encodes into a
// pooled buffer and copies out, one allocation of the line's size.
func marshalLine(v any) ([]byte, error) {
	p := linePool.Get().(*[]byte)
	defer linePool.Put(p)
	b, err := appendLine((*p)[:0], v)
	if err != nil {
		return nil, err
	}
	if cap(b) <= 64<<10 {
		*p = b[:0] // keep a grown buffer, unless it grew for a huge line
	}
	return bytes.Clone(b), nil
}

var linePool = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// appendLine appends v's line, newline included, to dst.
func appendLine(dst []byte, v any) ([]byte, error) {
	w := jsonWriter{b: dst}
	switch m := v.(type) {
	case *Response:
		w.response(m)
	case *Event:
		w.event(m)
	default:
		b, err := json.Marshal(v)
		return append(append(dst, b...), '\n'), err
	}
	if w.err != nil {
		return nil, w.err
	}
	return append(w.b, '\n'), nil
}

// jsonWriter appends JSON to b; the first error sticks.
type jsonWriter struct {
	b   []byte
	err error
}

// key starts the member name of an object: a comma unless it is the
// object's first.
func (w *jsonWriter) key(name string) {
	if w.b[len(w.b)-1] != '{' {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

// str appends s as encoding/json does (HTML characters escaped, invalid
// UTF-8 as U+FFFD, U+2028 and U+2029 escaped), without its allocations:
// a grantor's error in a status reply, a lease name with UTF-8.
func (w *jsonWriter) str(s string) {
	const hex = "0123456789abcdef"
	b := append(w.b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	w.b = append(b, '"')
}

func (w *jsonWriter) i64(v int64)  { w.b = strconv.AppendInt(w.b, v, 10) }
func (w *jsonWriter) u64(v uint64) { w.b = strconv.AppendUint(w.b, v, 10) }
func (w *jsonWriter) bool(v bool)  { w.b = strconv.AppendBool(w.b, v) }

// f64 appends v as encoding/json does (ES6 number formatting); NaN and
// infinities are errors there, and here.
func (w *jsonWriter) f64(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		if w.err == nil {
			w.err = fmt.Errorf("ipc: unsupported value %v", v)
		}
		w.b = append(w.b, '0')
		return
	}
	if v == math.Trunc(v) && math.Abs(v) < 1<<53 && (v != 0 || !math.Signbit(v)) {
		// A whole number (a rate of 500 ppm, a frequency of 0), the same
		// digits without the shortest-float search; -0 stays below.
		w.b = strconv.AppendInt(w.b, int64(v), 10)
		return
	}
	format := byte('f')
	if abs := math.Abs(v); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	w.b = strconv.AppendFloat(w.b, v, format, -1, 64)
	if format == 'e' {
		// e-09 to e-9, as encoding/json does.
		if n := len(w.b); n >= 4 && w.b[n-4] == 'e' && w.b[n-3] == '-' && w.b[n-2] == '0' {
			w.b[n-2] = w.b[n-1]
			w.b = w.b[:n-1]
		}
	}
}

func (w *jsonWriter) response(r *Response) {
	w.b = append(w.b, '{')
	w.key("id")
	if r.ID == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.u64(*r.ID)
	}
	w.key("ok")
	w.bool(r.OK)
	if r.Error != nil {
		w.key("error")
		w.error(r.Error)
	}
	if r.Hello != nil {
		w.helloFields(r.Hello)
	}
	if r.Grant != nil {
		w.grantFields(r.Grant)
	}
	if r.Leases != nil {
		w.key("leases")
		if *r.Leases == nil {
			w.b = append(w.b, "null"...)
		} else {
			w.b = append(w.b, '[')
			for i := range *r.Leases {
				if i > 0 {
					w.b = append(w.b, ',')
				}
				w.b = append(w.b, '{')
				w.grantFields(&(*r.Leases)[i])
				w.b = append(w.b, '}')
			}
			w.b = append(w.b, ']')
		}
	}
	if r.Clock != nil {
		w.key("clock")
		w.clock(r.Clock)
	}
	if r.Grantor != nil {
		w.key("grantor")
		w.grantor(r.Grantor)
	}
	if r.Members != nil {
		w.key("members")
		if *r.Members == nil {
			w.b = append(w.b, "null"...)
		} else {
			w.b = append(w.b, '[')
			for i := range *r.Members {
				if i > 0 {
					w.b = append(w.b, ',')
				}
				w.member(&(*r.Members)[i])
			}
			w.b = append(w.b, ']')
		}
	}
	if r.LeaderID != "" {
		w.key("leader_id")
		w.str(r.LeaderID)
	}
	if r.ReleasedToken != "" {
		w.key("released_token")
		w.str(r.ReleasedToken)
	}
	if r.Live != nil {
		w.key("live")
		w.bool(*r.Live)
	}
	if len(r.Tokens) > 0 {
		w.key("tokens")
		w.b = append(w.b, '[')
		for i, t := range r.Tokens {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(t)
		}
		w.b = append(w.b, ']')
	}
	if r.ClusterLeases != nil {
		// A rare operator's reply: encoding/json's own encoding.
		w.key("cluster_leases")
		b, err := json.Marshal(*r.ClusterLeases)
		if err != nil && w.err == nil {
			w.err = err
		}
		w.b = append(w.b, b...)
	}
	if r.More {
		w.key("more")
		w.bool(true)
	}
	w.b = append(w.b, '}')
}

func (w *jsonWriter) error(e *Error) {
	w.b = append(w.b, '{')
	w.key("code")
	w.str(e.Code)
	w.key("message")
	w.str(e.Message)
	if e.HolderToken != "" {
		w.key("holder_token")
		w.str(e.HolderToken)
	}
	if e.Holder != "" {
		w.key("holder")
		w.str(e.Holder)
	}
	if e.MinTTLMs != 0 {
		w.key("min_ttl_ms")
		w.i64(e.MinTTLMs)
	}
	if e.MaxTTLMs != 0 {
		w.key("max_ttl_ms")
		w.i64(e.MaxTTLMs)
	}
	w.b = append(w.b, '}')
}

func (w *jsonWriter) helloFields(h *Hello) {
	w.key("server")
	w.str(h.Server)
	w.key("version")
	w.str(h.Version)
	w.key("protocol")
	w.i64(int64(h.Protocol))
	if h.Session != "" {
		w.key("session")
		w.str(h.Session)
	}
	if h.MinTTLMs != 0 {
		w.key("min_ttl_ms")
		w.i64(h.MinTTLMs)
	}
	if h.MaxTTLMs != 0 {
		w.key("max_ttl_ms")
		w.i64(h.MaxTTLMs)
	}
}

func (w *jsonWriter) grantFields(g *Grant) {
	w.key("lease")
	w.str(g.Lease)
	w.key("token")
	w.str(g.Token)
	w.key("deadline_boottime_ns")
	w.i64(g.DeadlineBoottimeNs)
	w.key("valid_ms")
	w.i64(g.ValidMs)
	w.key("deadline")
	w.str(g.Deadline)
	w.key("ttl_ms")
	w.i64(g.TTLMs)
	w.key("owner")
	w.str(g.Owner)
	if g.OwnerPID != 0 {
		w.key("owner_pid")
		w.i64(int64(g.OwnerPID))
	}
	if g.LockDelayMs != 0 {
		w.key("lock_delay_ms")
		w.i64(g.LockDelayMs)
	}
	if g.NoRenew {
		w.key("no_renew")
		w.bool(true)
	}
	if g.Renewals != 0 {
		w.key("renewals")
		w.i64(g.Renewals)
	}
	if g.RenewalLatencyUs != 0 {
		w.key("renewal_latency_us")
		w.i64(g.RenewalLatencyUs)
	}
	if g.RenewedAgoMs != 0 {
		w.key("renewed_ago_ms")
		w.i64(g.RenewedAgoMs)
	}
	if g.Limit != 0 {
		w.key("limit")
		w.i64(int64(g.Limit))
	}
	if g.Holders != 0 {
		w.key("holders")
		w.i64(int64(g.Holders))
	}
	if g.Shared {
		w.key("shared")
		w.bool(true)
	}
	if g.Value != "" {
		w.key("value")
		w.str(g.Value)
	}
	if g.Resume != "" {
		w.key("resume")
		w.str(g.Resume)
	}
}

func (w *jsonWriter) clock(c *ClockStatus) {
	w.b = append(w.b, '{')
	w.key("kernel_synced")
	w.bool(c.KernelSynced)
	w.key("kernel_freq_ppm")
	w.f64(c.KernelFreqPPM)
	w.key("kernel_max_error_ms")
	w.i64(c.KernelMaxErrorMs)
	if c.DriftPPM != nil {
		w.key("drift_ppm")
		w.f64(*c.DriftPPM)
	}
	w.key("drift_samples")
	w.i64(int64(c.DriftSamples))
	w.key("rho_ppm")
	w.f64(c.RhoPPM)
	w.key("effective_rho_ppm")
	w.f64(c.EffectiveRhoPPM)
	w.key("longest_recent_pause_ms")
	w.i64(c.LongestRecentPauseMs)
	w.key("pause_window_ms")
	w.i64(c.PauseWindowMs)
	w.key("pauses")
	w.u64(c.Pauses)
	w.key("suspends")
	w.u64(c.Suspends)
	w.key("suspended_ms")
	w.i64(c.SuspendedMs)
	if len(c.PauseHistogram) > 0 {
		w.key("pause_histogram")
		w.b = append(w.b, '[')
		for i, bk := range c.PauseHistogram {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			w.key("le_ms")
			w.f64(bk.LeMs)
			w.key("count")
			w.u64(bk.Count)
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	w.b = append(w.b, '}')
}

func (w *jsonWriter) grantor(g *GrantorStatus) {
	w.b = append(w.b, '{')
	w.key("leader_reachable")
	w.bool(g.LeaderReachable)
	if g.Leader != "" {
		w.key("leader")
		w.str(g.Leader)
	}
	w.key("since_contact_ms")
	w.i64(g.SinceContactMs)
	if g.Error != "" {
		w.key("error")
		w.str(g.Error)
	}
	w.key("known")
	if g.Known == nil {
		w.b = append(w.b, "null"...)
	} else {
		w.b = append(w.b, '[')
		for i, k := range g.Known {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.str(k)
		}
		w.b = append(w.b, ']')
	}
	w.key("found_by")
	w.str(g.FoundBy)
	w.b = append(w.b, '}')
}

func (w *jsonWriter) member(m *Member) {
	w.b = append(w.b, '{')
	w.key("name")
	w.str(m.Name)
	w.key("role")
	w.str(m.Role)
	for _, f := range []struct{ k, v string }{{"node_id", m.NodeID}, {"rpc_addr", m.RPCAddr}, {"raft_addr", m.RaftAddr}, {"gossip_addr", m.GossipAddr}, {"gossip_state", m.GossipState}} {
		if f.v != "" {
			w.key(f.k)
			w.str(f.v)
		}
	}
	w.key("voter")
	w.bool(m.Voter)
	if m.RaftState != "" {
		w.key("raft_state")
		w.str(m.RaftState)
	}
	w.key("last_contact_ms")
	w.i64(m.LastContactMs)
	if m.Version != "" {
		w.key("version")
		w.str(m.Version)
	}
	w.b = append(w.b, '}')
}

func (w *jsonWriter) event(e *Event) {
	w.b = append(w.b, '{')
	w.key("event")
	w.str(e.Event)
	for _, f := range []struct{ k, v string }{{"lease", e.Lease}, {"token", e.Token}, {"reason", e.Reason}} {
		if f.v != "" {
			w.key(f.k)
			w.str(f.v)
		}
	}
	for _, f := range []struct {
		k string
		v int64
	}{{"deadline_boottime_ns", e.DeadlineBoottimeNs}, {"valid_ms", e.ValidMs}, {"late_ms", e.LateMs}, {"length_ms", e.LengthMs}} {
		if f.v != 0 {
			w.key(f.k)
			w.i64(f.v)
		}
	}
	if e.RatePPM != 0 {
		w.key("rate_ppm")
		w.f64(e.RatePPM)
	}
	for _, f := range []struct{ k, v string }{{"change", e.Change}, {"holder", e.Holder}, {"value", e.Value}} {
		if f.v != "" {
			w.key(f.k)
			w.str(f.v)
		}
	}
	if len(e.Holders) > 0 {
		w.key("holders")
		w.b = append(w.b, '[')
		for i, h := range e.Holders {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = append(w.b, '{')
			w.key("token")
			w.str(h.Token)
			w.key("holder")
			w.str(h.Holder)
			if h.Value != "" {
				w.key("value")
				w.str(h.Value)
			}
			w.b = append(w.b, '}')
		}
		w.b = append(w.b, ']')
	}
	if e.Limit != 0 {
		w.key("limit")
		w.i64(int64(e.Limit))
	}
	if e.Shared {
		w.key("shared")
		w.bool(true)
	}
	w.b = append(w.b, '}')
}
