package hosts

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/internal/bench"
)

// shardProc is a shard process, as Run drives it.
type shardProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
	enc *json.Encoder
}

// hostsPerShard is how many hosts one shard process may hold under the
// open files limit limit, with connections to grantors grantors.
func hostsPerShard(limit uint64, grantors int) int {
	return max(1, (int(limit)-1024)/(3+grantors))
}

// startShards starts the shard processes for cfg's hosts and waits until
// each holds its leases.
func startShards(ctx context.Context, cfg Config, run string, progress func(string, ...any)) ([]*shardProc, error) {
	if len(cfg.ShardArgs) == 0 {
		return nil, errors.New("bench hosts: no command to start shard processes with")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return nil, err
	}
	per := min(hostsPerShard(rl.Max, len(cfg.Grantors)), cfg.HostsPerShard)
	n := (cfg.Hosts + per - 1) / per
	var shards []*shardProc
	for first := 0; first < cfg.Hosts; first += per {
		spec := shardSpec{Grantors: cfg.Grantors, LeasesPerHost: cfg.LeasesPerHost, Term: cfg.Term, Concurrency: max(1, cfg.Concurrency/n),
			Sources: cfg.Sources, First: first, Count: min(per, cfg.Hosts-first), Run: run}
		s, err := startShard(ctx, exe, cfg.ShardArgs, spec)
		if err != nil {
			stopShards(shards)
			return nil, err
		}
		shards = append(shards, s)
	}
	progress("%d hosts in %d shard processes of at most %d (open files limit %d)", cfg.Hosts, len(shards), per, rl.Max)
	replies, err := all(shards, nil)
	if err != nil {
		stopShards(shards)
		return nil, err
	}
	for _, r := range replies {
		if !r.Ready {
			stopShards(shards)
			return nil, errors.New("bench hosts: a shard did not say ready")
		}
	}
	return shards, nil
}

func startShard(ctx context.Context, exe string, args []string, spec shardSpec) (*shardProc, error) {
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench hosts: starting a shard: %w", err)
	}
	s := &shardProc{cmd: cmd, in: in, out: bufio.NewScanner(out), enc: json.NewEncoder(in)}
	s.out.Buffer(nil, 1<<30)
	if err := s.enc.Encode(spec); err != nil {
		stopShards([]*shardProc{s})
		return nil, err
	}
	return s, nil
}

// ask sends c (nil: nothing, read the next reply) and reads the reply.
func (s *shardProc) ask(c *command) (*shardReply, error) {
	if c != nil {
		if err := s.enc.Encode(c); err != nil {
			return nil, fmt.Errorf("bench hosts: shard pid %d: %w", s.cmd.Process.Pid, err)
		}
	}
	if !s.out.Scan() {
		return nil, fmt.Errorf("bench hosts: shard pid %d ended (%v); its stderr says why", s.cmd.Process.Pid, s.out.Err())
	}
	var r shardReply
	if err := json.Unmarshal(s.out.Bytes(), &r); err != nil {
		return nil, fmt.Errorf("bench hosts: shard pid %d: %w", s.cmd.Process.Pid, err)
	}
	if r.Err != "" {
		return nil, fmt.Errorf("bench hosts: shard pid %d: %s", s.cmd.Process.Pid, r.Err)
	}
	return &r, nil
}

// all asks every shard c at once and returns their replies in order.
func all(shards []*shardProc, c *command) ([]*shardReply, error) {
	replies := make([]*shardReply, len(shards))
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	for i, s := range shards {
		wg.Go(func() { replies[i], errs[i] = s.ask(c) })
	}
	wg.Wait()
	return replies, errors.Join(errs...)
}

// stopShards ends every shard's input, which stops its hosts (their
// programs' connections close and release their leases), and waits for
// it to exit.
func stopShards(shards []*shardProc) {
	for _, s := range shards {
		s.in.Close()
	}
	for _, s := range shards {
		s.cmd.Wait()
	}
}

// cpuOf is the CPU seconds the shards used so far.
func cpuOf(shards []*shardProc) float64 {
	var sum float64
	for _, s := range shards {
		if v, err := bench.CPUSeconds(s.cmd.Process.Pid); err == nil {
			sum += v
		}
	}
	return sum
}
