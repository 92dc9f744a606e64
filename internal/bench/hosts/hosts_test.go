package hosts

import (
	"strings"
	"testing"
	"time"
)

func TestValidateRefusesBadInput(t *testing.T) {
	ok := DefaultConfig()
	ok.Grantors, ok.GrantorPIDs = []string{"127.0.0.1:1", "127.0.0.1:2"}, []int{10, 11}
	if err := ok.Validate(); err != nil {
		t.Fatalf("defaults with grantors: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no grantors", func(c *Config) { c.Grantors, c.GrantorPIDs = nil, nil }, "no grantor address"},
		{"pids missing", func(c *Config) { c.GrantorPIDs = c.GrantorPIDs[:1] }, "1 grantor pids for 2 grantors"},
		{"pid zero", func(c *Config) { c.GrantorPIDs[1] = 0 }, "grantor pid 0 (of 127.0.0.1:2)"},
		{"no hosts", func(c *Config) { c.Hosts = 0 }, "hosts 0 is below 1"},
		{"short term", func(c *Config) { c.Term = time.Second }, "term 1s is outside"},
		{"kill after the end", func(c *Config) { c.KillLeader = c.Duration }, "must lie inside the measured duration"},
		{"too few sources", func(c *Config) { c.Hosts, c.Sources = 1001, 5 }, "1001 hosts need at least 6 source addresses"},
	} {
		cfg := ok
		cfg.GrantorPIDs = append([]int(nil), ok.GrantorPIDs...)
		c.edit(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestSourceAddrsStayApart(t *testing.T) {
	seen := map[string]int{}
	for i := range 62500 {
		a := sourceAddr(i, 62500)
		if a[0] != 127 {
			t.Fatalf("host %d dials from %v, not loopback", i, a)
		}
		if j, dup := seen[a.String()]; dup {
			t.Fatalf("hosts %d and %d share %v", j, i, a)
		}
		seen[a.String()] = i
	}
	if a, b := sourceAddr(3, 10), sourceAddr(13, 10); !a.Equal(b) {
		t.Errorf("round robin over 10 sources: host 3 dials from %v, host 13 from %v", a, b)
	}
}

func TestPeakPerSecondAndHistogram(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	at := ms(0, 100, 1200, 1300, 1400, 2100, 2150)
	if got := peakPerSecond(at); got != 5 { // 1200..2150
		t.Errorf("peakPerSecond = %d, want 5", got)
	}
	if got, want := histogram(at, 500*time.Millisecond), "0.00s:2 0.50s:0 1.00s:3 1.50s:0 2.00s:2"; got != want {
		t.Errorf("histogram = %q, want %q", got, want)
	}
	if got := histogram(nil, time.Second); got != "none" {
		t.Errorf("histogram of nothing = %q", got)
	}
}
