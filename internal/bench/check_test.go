package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

func TestSessionRenewed(t *testing.T) {
	sent := &grantorpb.SessionRenewal{Session: "s", LeaseSetVersion: grantorpb.LeaseSetDigest([]uint64{1, 2, 3})}
	ok := func() *grantorpb.SessionRenewed {
		return &grantorpb.SessionRenewed{Session: "s", Renewed: true, LeaseSetVersion: sent.LeaseSetVersion}
	}
	for _, tc := range []struct {
		name    string
		resp    *grantorpb.KeepAliveResponse
		wantErr bool
	}{
		{name: "renewed", resp: &grantorpb.KeepAliveResponse{Sessions: []*grantorpb.SessionRenewed{ok()}}},
		{name: "not renewed", resp: &grantorpb.KeepAliveResponse{Sessions: []*grantorpb.SessionRenewed{func() *grantorpb.SessionRenewed { r := ok(); r.Renewed = false; return r }()}}, wantErr: true},
		{name: "other grants", resp: &grantorpb.KeepAliveResponse{Sessions: []*grantorpb.SessionRenewed{func() *grantorpb.SessionRenewed { r := ok(); r.LeaseSetVersion++; return r }()}}, wantErr: true},
		{name: "listed", resp: &grantorpb.KeepAliveResponse{Sessions: []*grantorpb.SessionRenewed{func() *grantorpb.SessionRenewed { r := ok(); r.Listed = true; return r }()}}, wantErr: true},
		{name: "no session", resp: &grantorpb.KeepAliveResponse{}, wantErr: true},
		{name: "another session", resp: &grantorpb.KeepAliveResponse{Sessions: []*grantorpb.SessionRenewed{func() *grantorpb.SessionRenewed { r := ok(); r.Session = "x"; return r }()}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := sessionRenewed(sent, tc.resp)
			if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrViolation)) {
				t.Errorf("sessionRenewed = %v, want error %v (an ErrViolation)", err, tc.wantErr)
			}
		})
	}
}

func TestListedAll(t *testing.T) {
	held := []held{{lease: "a", token: 1}, {lease: "b", token: 2}, {lease: "c", token: 3}}
	refs := func(pairs ...any) []*grantorpb.LeaseRef {
		var out []*grantorpb.LeaseRef
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, &grantorpb.LeaseRef{Lease: pairs[i].(string), Token: uint64(pairs[i+1].(int))})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		listed  []*grantorpb.LeaseRef
		wantErr bool
	}{
		{name: "any order", listed: refs("c", 3, "a", 1, "b", 2)},
		{name: "one missing", listed: refs("a", 1, "b", 2), wantErr: true},
		{name: "other token", listed: refs("b", 2, "a", 1, "c", 4), wantErr: true},
		{name: "duplicate", listed: refs("b", 2, "a", 1, "a", 1), wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := listedAll(held, &grantorpb.SessionRenewed{Renewed: true, Listed: true, Leases: tc.listed})
			if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrViolation)) {
				t.Errorf("listedAll = %v, want error %v (an ErrViolation)", err, tc.wantErr)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	var l Latencies
	for i := 1; i <= 100; i++ {
		l = append(l, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		name string
		q    float64
		want float64
	}{
		{name: "p50", q: 0.5, want: 50},
		{name: "p99", q: 0.99, want: 99},
		{name: "max", q: 1, want: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := l.MS(tc.q); got != tc.want {
				t.Errorf("ms(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if got := (Latencies{}).MS(0.5); got != 0 {
		t.Errorf("empty ms = %v, want 0", got)
	}
}

func TestDistinct(t *testing.T) {
	if err := distinct([]uint64{3, 1, 2}); err != nil {
		t.Errorf("distinct tokens: %v", err)
	}
	if err := distinct([]uint64{3, 1, 3}); !errors.Is(err, ErrViolation) {
		t.Errorf("a token twice: %v, want ErrViolation", err)
	}
}

func TestValidate(t *testing.T) {
	base := DefaultConfig()
	base.Grantors = []string{"127.0.0.1:1"}
	base.LeaderPID = 1
	for _, tc := range []struct {
		name    string
		edit    func(*Config)
		wantErr bool
	}{
		{name: "default with a grantor and pid", edit: func(*Config) {}},
		{name: "no grantor", edit: func(c *Config) { c.Grantors = nil }, wantErr: true},
		{name: "unknown workload", edit: func(c *Config) { c.Workloads = []string{"nap"} }, wantErr: true},
		{name: "memory needs pid or metrics", edit: func(c *Config) { c.LeaderPID = 0 }, wantErr: true},
		{name: "metrics alone will do for memory", edit: func(c *Config) {
			c.Workloads, c.LeaderPID, c.LeaderMetrics = []string{Memory}, 0, "http://127.0.0.1:9/metrics"
		}},
		{name: "metrics not a URL", edit: func(c *Config) { c.LeaderMetrics = "127.0.0.1:9" }, wantErr: true},
		{name: "ttl below 1s", edit: func(c *Config) { c.LeaseTTL = time.Millisecond }, wantErr: true},
		{name: "too many leases per keepalive", edit: func(c *Config) { c.SessionLeases = 70000 }, wantErr: true},
		{name: "one contender", edit: func(c *Config) { c.HandoffOwners = 1 }, wantErr: true},
		{name: "growth: many not above few", edit: func(c *Config) { c.LiveMany = c.LiveFew }, wantErr: true},
		{name: "growth: no sessions", edit: func(c *Config) { c.LiveSessions = 0 }, wantErr: true},
		{name: "keepalives-growth: many below few", edit: func(c *Config) { c.HostLeasesMany = c.HostLeasesFew - 1 }, wantErr: true},
		{name: "keepalives-growth: above a keepalive's limit", edit: func(c *Config) { c.HostLeasesMany = 70000 }, wantErr: true},
		{name: "keepalives-growth needs the pid", edit: func(c *Config) {
			c.Workloads, c.LeaderPID, c.LeaderMetrics = []string{KeepAlivesGrowth}, 0, "http://127.0.0.1:9/metrics"
		}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			if err := c.Validate(); tc.wantErr != (err != nil) {
				t.Errorf("Validate = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestBaton(t *testing.T) {
	var b baton
	if _, err := b.take(0, 5); err != nil {
		t.Fatalf("first grant: %v", err)
	}
	if _, err := b.take(1, 6); !errors.Is(err, ErrViolation) {
		t.Errorf("a grant while held: %v, want ErrViolation", err)
	}
	b.give()
	prev, err := b.take(1, 6)
	if err != nil || prev.IsZero() {
		t.Errorf("grant after release: prev %v, %v; want the release's time, nil", prev, err)
	}
	b.give()
	if _, err := b.take(2, 6); !errors.Is(err, ErrViolation) {
		t.Errorf("a token that did not grow: %v, want ErrViolation", err)
	}
}

func TestSetTarget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		value  float64
		op     string
		target float64
		met    bool
	}{
		{name: "at least, met", value: 10, op: ">=", target: 10, met: true},
		{name: "at least, missed", value: 9, op: ">=", target: 10},
		{name: "at most, met", value: 10, op: "<=", target: 10, met: true},
		{name: "below, missed", value: 10, op: "<", target: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r Result
			r.Add("f", tc.value, "/s")
			r.SetTarget("f", tc.op, tc.target)
			f, _ := r.Figure("f")
			if f.Target == nil || f.Met == nil || *f.Met != tc.met || f.Target.Op != tc.op || f.Target.Value != tc.target {
				t.Errorf("figure %+v, want target %s %v met %v", f, tc.op, tc.target, tc.met)
			}
		})
	}
}
