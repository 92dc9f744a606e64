package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestResolveLeader(t *testing.T) {
	g := func(id, leader string, seq uint64) grantorView {
		return grantorView{nodeID: id, rpcAddr: "rpc-" + id, leaderID: leader, seq: seq}
	}
	tests := []struct {
		name string
		gs   []grantorView
		want string
	}{
		{name: "none", gs: nil, want: ""},
		{name: "nobody knows", gs: []grantorView{g("a", "", 1), g("b", "", 2)}, want: ""},
		{name: "agreement", gs: []grantorView{g("a", "a", 1), g("b", "a", 2), g("c", "a", 3)}, want: "rpc-a"},
		{name: "self claim beats others' claims", gs: []grantorView{g("a", "b", 1), g("b", "", 2), g("c", "b", 3), g("d", "d", 4)}, want: "rpc-d"},
		{name: "two self claims: more support wins", gs: []grantorView{g("a", "a", 9), g("b", "b", 1), g("c", "b", 2)}, want: "rpc-b"},
		{name: "two self claims, tie: most recent wins", gs: []grantorView{g("a", "a", 1), g("b", "b", 2)}, want: "rpc-b"},
		{name: "no self claim: majority", gs: []grantorView{g("a", "b", 5), g("b", "", 1), g("c", "b", 2), g("d", "c", 9)}, want: "rpc-b"},
		{name: "no self claim, tie: most recent", gs: []grantorView{g("a", "b", 1), g("b", "", 2), g("c", "", 3), g("d", "c", 9)}, want: "rpc-c"},
		{name: "claim for an unknown grantor", gs: []grantorView{g("a", "zz", 1), g("b", "zz", 2)}, want: ""},
		{name: "unknown outvoted by a known one", gs: []grantorView{g("a", "zz", 1), g("b", "zz", 2), g("c", "a", 3)}, want: "rpc-a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolveLeader(tt.gs); got != tt.want {
				t.Errorf("resolveLeader = %q, want %q", got, tt.want)
			}
			rev := slices.Clone(tt.gs)
			slices.Reverse(rev)
			if got := resolveLeader(rev); got != tt.want {
				t.Errorf("reversed order: resolveLeader = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRoster(t *testing.T) {
	r := newRoster(time.Hour)
	t0 := time.Now()
	ch := r.changes()
	r.alive("g1", "127.0.0.1:1", encodeMeta(grantorMeta(1, "g1"), false))
	select {
	case <-ch:
	default:
		t.Fatal("changes() not closed by a join")
	}
	r.alive("g2", "127.0.0.1:2", encodeMeta(grantorMeta(2, "g1"), false))
	r.alive("g3", "127.0.0.1:3", encodeMeta(grantorMeta(3, "g1"), false))
	r.alive("future", "127.0.0.1:4", append([]byte{9}, encodeMeta(grantorMeta(4, "g4"), false)[1:]...))
	r.alive("side", "127.0.0.1:5", encodeMeta(sidecarMeta(), false))

	// g2 announces leaving and then goes; g3 just goes.
	r.alive("g2", "127.0.0.1:2", encodeMeta(grantorMeta(2, "g1"), true))
	states := func(now time.Time) map[string]string {
		out := map[string]string{}
		for _, e := range r.snapshot(now) {
			out[e.info.Name] = e.info.State
		}
		return out
	}
	if s := states(t0)["g2"]; s != StateLeaving {
		t.Errorf("g2 after its leaving notice: %q", s)
	}
	if addrs, _ := r.grantors(t0); !slices.Equal(addrs, []string{"127.0.0.1:17001", "127.0.0.1:17003"}) {
		t.Errorf("a leaving grantor is still offered: %v", addrs)
	}
	r.gone("g2", t0)
	r.gone("g3", t0)
	r.gone("never-seen", t0)
	if s := states(t0); s["g2"] != StateLeft || s["g3"] != StateDead || s["g1"] != StateAlive || len(s) != 5 {
		t.Errorf("states %v", s)
	}
	for _, e := range r.snapshot(t0) {
		if e.info.Name == "future" && !errors.Is(e.info.MetaErr, ErrMetaVersion) {
			t.Errorf("member with meta version 9: MetaErr %v", e.info.MetaErr)
		}
	}
	if addrs, leader := r.grantors(t0); !slices.Equal(addrs, []string{"127.0.0.1:17001"}) || leader != "127.0.0.1:17001" {
		t.Errorf("grantors = %v, %q", addrs, leader)
	}
	// Rejoining makes a member alive again; the gone ones are forgotten
	// after forgetAfter.
	r.alive("g3", "127.0.0.1:3", encodeMeta(grantorMeta(3, "g1"), false))
	if s := states(t0.Add(2 * time.Hour)); len(s) != 4 || s["g3"] != StateAlive || s["g2"] != "" {
		t.Errorf("after forgetAfter: %v", s)
	}
}

// A member's Appearance changes when it comes back or restarts, not when
// the same run updates its metadata.
func TestRosterAppearance(t *testing.T) {
	r := newRoster(time.Hour)
	now := time.Now()
	appearance := func() uint64 {
		for _, e := range r.snapshot(now) {
			if e.info.Name == "g1" {
				return e.info.Appearance
			}
		}
		t.Fatal("g1 not listed")
		return 0
	}
	run := func(instance uint64, leader string, leaving bool) []byte {
		m := grantorMeta(1, leader)
		m.Instance = instance
		return encodeMeta(m, leaving)
	}
	r.alive("g1", "127.0.0.1:1", run(7, "", false))
	first := appearance()
	r.alive("g1", "127.0.0.1:1", run(7, "g1", false)) // a new leader hint
	r.alive("g2", "127.0.0.1:2", encodeMeta(grantorMeta(2, "g1"), false))
	if a := appearance(); a != first {
		t.Errorf("metadata update: appearance %d, want %d", a, first)
	}
	r.alive("g1", "127.0.0.1:1", run(8, "", false)) // restarted, never declared dead
	restarted := appearance()
	if restarted == first {
		t.Error("another instance kept the appearance")
	}
	r.gone("g1", now)
	if a := appearance(); a != restarted {
		t.Errorf("dead: appearance %d, want %d", a, restarted)
	}
	r.alive("g1", "127.0.0.1:1", run(8, "g1", false)) // the same run, back after a partition
	back := appearance()
	if back == restarted || back == first {
		t.Errorf("back after it was dead: appearance %d, seen before", back)
	}
	r.alive("g1", "127.0.0.1:1", run(8, "g1", true)) // announces leaving
	if a := appearance(); a != back {
		t.Errorf("leaving: appearance %d, want %d", a, back)
	}
}

type recordHandler struct {
	slog.Handler
	recs *[]slog.Record
}

func (h recordHandler) Handle(_ context.Context, r slog.Record) error {
	*h.recs = append(*h.recs, r)
	return nil
}

func TestLogWriter(t *testing.T) {
	var recs []slog.Record
	l := slog.New(recordHandler{slog.NewTextHandler(nil, &slog.HandlerOptions{Level: slog.LevelDebug}), &recs})
	w := newLogWriter(l)
	for _, line := range []string{
		"[DEBUG] memberlist: Stream connection from=127.0.0.1:1\n",
		"[WARN] memberlist: Refuting a suspect message\n",
		"[ERR] memberlist: failed to receive: no installed keys could decrypt the message from=127.0.0.1:2\n",
		"Err: Could not set the deadline\n",
		// After Shutdown closed the sockets (every clean shutdown).
		"[ERR] memberlist: Failed to send gossip to 127.0.0.1:3: write udp 127.0.0.1:4->127.0.0.1:3: use of closed network connection\n",
		// A peer down or slow (every failover).
		"[ERR] memberlist: Failed fallback TCP ping: timeout 1s: read tcp 127.0.0.1:5->127.0.0.1:6: i/o timeout\n",
	} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	// The decrypt failure, about what a peer sent, is a warning; a send
	// on a socket Shutdown closed is routine; a peer that does not answer
	// a ping is a warning.
	want := []slog.Level{slog.LevelDebug, slog.LevelWarn, slog.LevelWarn, slog.LevelInfo, slog.LevelDebug, slog.LevelWarn}
	if len(recs) != len(want) {
		t.Fatalf("%d records", len(recs))
	}
	for i, r := range recs {
		if r.Level != want[i] || strings.HasPrefix(r.Message, "[") || strings.HasPrefix(r.Message, "memberlist:") {
			t.Errorf("record %d: %v %q", i, r.Level, r.Message)
		}
	}
	hint := ""
	recs[2].Attrs(func(a slog.Attr) bool {
		if a.Key == "hint" {
			hint = a.Value.String()
		}
		return true
	})
	if !strings.Contains(hint, "gossip key is wrong or missing") {
		t.Errorf("decrypt failure logged without the key hint: %q", hint)
	}
}

// Lines about what a peer sent (review R8-10: anyone can send UDP to the
// gossip port, from any source address) are counted, and written at most
// once per message every refusedLogInterval, the next counting those
// held back; other lines are not limited.
func TestLogWriterLimitsRefusedPackets(t *testing.T) {
	var recs []slog.Record
	l := slog.New(recordHandler{slog.NewTextHandler(nil, &slog.HandlerOptions{Level: slog.LevelDebug}), &recs})
	w := newLogWriter(l)
	now := time.Now()
	w.now = func() time.Time { return now }
	write := func(line string, n int) {
		t.Helper()
		for i := range n {
			if _, err := w.Write([]byte(fmt.Sprintf(line, i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("[ERR] memberlist: discarding packet with unacceptable label \"\": from=127.0.0.1:%d\n", 1000)
	write("[WARN] memberlist: Refuting a suspect message (%d)\n", 3)
	if len(recs) != 1+3 || w.refused.Load() != 1000 {
		t.Fatalf("%d records, %d refused counted; want 1 + the 3 unlimited ones, 1000", len(recs), w.refused.Load())
	}
	if recs[0].Level != slog.LevelWarn || strings.Contains(recs[0].Message, "from=") {
		t.Errorf("first refused line: %v %q", recs[0].Level, recs[0].Message)
	}
	now = now.Add(refusedLogInterval)
	write("[ERR] memberlist: discarding packet with unacceptable label \"\": from=127.0.0.1:%d\n", 1)
	if len(recs) != 5 {
		t.Fatalf("%d records after the interval, want 5", len(recs))
	}
	suppressed := int64(-1)
	recs[4].Attrs(func(a slog.Attr) bool {
		if a.Key == "suppressed" {
			suppressed = a.Value.Int64()
		}
		return true
	})
	if suppressed != 999 {
		t.Errorf("the line after the interval says %d held back, want 999", suppressed)
	}
}
