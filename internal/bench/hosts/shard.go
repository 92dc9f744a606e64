package hosts

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
)

// A process holds at most its open files limit (20,000 on the machine of
// docs/scale.md, and only root with CAP_SYS_RESOURCE may raise it), and a
// simulated host takes several: its socket, its program's connection, the
// sidecar's end of it, its connections to grantors. So Run starts the
// hosts in shard processes (this binary again, ShardArgs), each holding a
// range of them, and drives them over their stdin and stdout, one JSON
// line each way per command.

// shardSpec is what a shard is told at its start.
type shardSpec struct {
	Grantors      []string      `json:"grantors"`
	LeasesPerHost int           `json:"leases_per_host"`
	Term          time.Duration `json:"term"`
	Concurrency   int           `json:"concurrency"`
	Sources       int           `json:"sources"`
	First, Count  int           // the hosts First .. First+Count-1
	Run           string        `json:"run"` // keeps this run's names apart
}

// command is a line to a shard.
type command struct {
	Cmd string `json:"cmd"` // reset, kill, progress, leader, report
	At  int64  `json:"at,omitempty"`
}

// shardReply is a shard's answer to its start (Ready) or a command.
type shardReply struct {
	Err   string `json:"err,omitempty"`
	Ready bool   `json:"ready,omitempty"`
	// Leader is the grantor a host of the shard last reached as leader
	// (ready, leader).
	Leader string `json:"leader,omitempty"`
	// Least is the shortest validity any of the shard's leases had left
	// at the kill (kill).
	Least time.Duration `json:"least,omitempty"`
	// Recovered and AllLost count the hosts that renewed every lease
	// after the kill, and those that lost every lease (progress).
	Recovered int `json:"recovered,omitempty"`
	AllLost   int `json:"all_lost,omitempty"`
	Report    *shardReport
}

// shardReport is what a shard measured (report).
type shardReport struct {
	Steady, Failing []time.Duration
	Renewals        int
	Lost            map[string]int
	Recovered       []int64         // BOOTTIME ns, per host that renewed every lease after the kill
	Margins         []time.Duration // per such host, how long before its soonest deadline
	Handshakes      []handshake
	// Held is the number of leases the shard's sidecars hold at the end
	// with the token first granted, of Total acquired.
	Held, Total int
}

// Shard runs one shard: it reads its shardSpec from in, starts its hosts
// with creds, says ready on out, then answers commands until in ends.
func Shard(ctx context.Context, creds credentials.TransportCredentials, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 1<<20)
	enc := json.NewEncoder(out)
	if !sc.Scan() {
		return errors.New("bench hosts shard: no spec on stdin")
	}
	var spec shardSpec
	if err := json.Unmarshal(sc.Bytes(), &spec); err != nil {
		return fmt.Errorf("bench hosts shard: spec: %w", err)
	}
	cfg := Config{Grantors: spec.Grantors, LeasesPerHost: spec.LeasesPerHost, Term: spec.Term, Concurrency: spec.Concurrency, Sources: spec.Sources}
	if err := raiseFileLimit(spec.Count, len(spec.Grantors)); err != nil {
		enc.Encode(shardReply{Err: err.Error()})
		return err
	}
	dir, err := os.MkdirTemp("", "leaseside-hosts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	hs := &handshakes{}
	sctx, stopSidecars := context.WithCancel(ctx)
	defer stopSidecars()
	progress := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "bench: hosts %d-%d: "+format+"\n", append([]any{spec.First, spec.First + spec.Count - 1}, args...)...)
	}
	hosts, err := startAll(sctx, cfg, spec.First, spec.Count, dir, spec.Run, newCountingCreds(creds, hs), progress)
	stop := make(chan struct{})
	defer stopAll(hosts, stop, stopSidecars)
	if err != nil {
		enc.Encode(shardReply{Err: err.Error()})
		return err
	}
	obs := newObserver(cfg)
	for _, h := range hosts {
		go obs.watch(h, stop)
	}
	ready := shardReply{Ready: true}
	ready.Leader, _ = leaderOf(ctx, hosts)
	if err := enc.Encode(ready); err != nil {
		return err
	}
	for sc.Scan() {
		var c command
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return fmt.Errorf("bench hosts shard: command: %w", err)
		}
		var r shardReply
		switch c.Cmd {
		case "reset":
			obs.reset()
		case "kill":
			r.Least = obs.kill(hosts, c.At)
		case "progress":
			r.Recovered, r.AllLost = obs.progress(hosts)
		case "leader":
			r.Leader, err = leaderOf(ctx, hosts)
			if err != nil {
				r.Err = err.Error()
			}
		case "report":
			r.Report, err = report(ctx, obs, hosts, hs)
			if err != nil {
				r.Err = err.Error()
			}
		default:
			r.Err = fmt.Sprintf("unknown command %q", c.Cmd)
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return sc.Err()
}

// stopAll closes every program's connection (which releases its leases)
// and stops the sidecars.
func stopAll(hosts []*host, stop chan struct{}, stopSidecars context.CancelFunc) {
	close(stop)
	for _, h := range hosts {
		if h != nil {
			h.close()
			h.stop()
		}
	}
	stopSidecars()
	for _, h := range hosts {
		if h != nil {
			<-h.ran
		}
	}
}

// leaderOf asks every host of the shard which grantor last answered it
// as leader, and returns the one most name.
func leaderOf(ctx context.Context, hosts []*host) (string, error) {
	named := map[string]int{}
	var last error
	for _, h := range hosts {
		st, err := h.c.StatusAll(ctx)
		switch {
		case err != nil:
			last = fmt.Errorf("status of host %d: %w", h.i, err)
		case st.Grantor == nil || st.Grantor.Leader == "":
			last = fmt.Errorf("host %d knows no leader", h.i)
		default:
			named[st.Grantor.Leader]++
		}
	}
	best := ""
	for addr, n := range named {
		if best == "" || n > named[best] {
			best = addr
		}
	}
	if best == "" {
		return "", last
	}
	return best, nil
}

// report checks with every sidecar of the shard that it still holds each
// lease its program acquired, with the token first granted, and returns
// what the shard measured.
func report(ctx context.Context, obs *observer, hosts []*host, hs *handshakes) (*shardReport, error) {
	r := &shardReport{Handshakes: hs.since(time.Time{})}
	obs.mu.Lock()
	r.Steady, r.Failing, r.Renewals = obs.steady, obs.failing, obs.renewals
	r.Lost, r.Recovered, r.Margins = obs.lost, obs.recovered, obs.margins
	obs.mu.Unlock()
	for _, h := range hosts {
		st, err := h.c.StatusAll(ctx)
		if err != nil {
			return nil, fmt.Errorf("status of host %d: %w", h.i, err)
		}
		for j, name := range h.names {
			r.Total++
			for _, g := range st.Leases {
				if g.Lease == name && g.Token == h.tokens[j] {
					r.Held++
					break
				}
			}
		}
	}
	return r, nil
}
