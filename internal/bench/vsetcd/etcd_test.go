package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/leaseside/leaseside/internal/bench"
)

// timeout bounds every wait in these tests; passing tests never reach it.
const timeout = 2 * time.Minute

// etcdMember is a running single-member etcd: its client URL and pid.
type etcdMember struct {
	url string
	pid int
}

// freePort returns a loopback port below the kernel's ephemeral range
// that nothing listened on a moment ago. Below that range no outgoing
// connection takes it meanwhile; a process that binds it by hand still
// may, which startEtcd survives by starting again on other ports.
func freePort(t *testing.T) int {
	t.Helper()
	low := 32768 // the default ephemeral range starts here
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if v, err := strconv.Atoi(f[0]); err == nil && v > 12000 {
				low = v
			}
		}
	}
	for range 1000 {
		port := 10000 + mrand.IntN(low-10000)
		ln, err := net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			ln.Close()
			return port
		}
	}
	t.Fatalf("no free loopback port below %d", low)
	return 0
}

// startEtcd starts Debian's etcd (installing etcd-server with apt-get if it
// is not there, as vs-etcd.sh does) as one member with its data in a
// temporary directory, and waits until it answers. An etcd that exits
// because another process took one of its ports first is started again
// on others.
func startEtcd(t *testing.T) etcdMember {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Log("etcd not found: installing etcd-server")
		install := exec.Command("sh", "-c", "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server")
		if out, err := install.CombinedOutput(); err != nil {
			t.Fatalf("installing etcd-server: %v\n%s", err, out)
		}
	}
	for attempt := 1; ; attempt++ {
		m, log, err := tryEtcd(t)
		if err == nil {
			return m
		}
		if attempt < 3 && strings.Contains(log, "address already in use") {
			t.Logf("etcd found a port taken (%v); starting it on others", err)
			continue
		}
		t.Fatalf("%v\n%s", err, log)
	}
}

// tryEtcd starts etcd once, on two ports picked free, and waits until it
// answers (nil error) or exits (an error, with its log).
func tryEtcd(t *testing.T) (etcdMember, string, error) {
	t.Helper()
	client := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freePort(t))
	var log bytes.Buffer
	cmd := exec.Command("etcd", "--name", "e1", "--data-dir", filepath.Join(t.TempDir(), "e1"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "e1="+peer,
		"--logger", "zap", "--log-outputs", "stderr")
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		err := <-exited
		exited <- err
		if t.Failed() {
			t.Logf("etcd log:\n%s", log.String())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	// findLeader asks the member for its status, retrying while it starts.
	for {
		if _, err := findLeader(ctx, []string{client}); err == nil {
			return etcdMember{url: client, pid: cmd.Process.Pid}, "", nil
		} else if ctx.Err() != nil {
			t.Fatalf("etcd did not answer within %v: %v", timeout, err)
		}
		select {
		case err := <-exited:
			exited <- err
			return etcdMember{}, log.String(), fmt.Errorf("etcd exited: %v", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Each etcd workload runs on a real etcd at tiny sizes and reports the
// figures vs-etcd.sh pairs, with the leader's CPU.
func TestEtcdWorkloads(t *testing.T) {
	m := startEtcd(t)
	common := []string{"etcd", "--endpoints", m.url, "--pids", strconv.Itoa(m.pid), "--clients", "2",
		"--duration", "300ms", "--warmup", "100ms", "--concurrency", "4"}
	for _, tc := range []struct {
		workload string
		args     []string
		figures  []string
	}{
		{workload: "locks", args: []string{"--owners", "3"}, figures: []string{"grants/s (each with its release)", "acquire latency p50", "leader CPU"}},
		{workload: "handoffs", args: []string{"--contenders", "3"}, figures: []string{"handoffs/s", "handoff latency p50", "leader CPU"}},
		{workload: "keepalives", args: []string{"--sessions", "4"}, figures: []string{"keepalive messages/s", "lease renewals/s", "leader CPU"}},
		{workload: "memory", args: []string{"--leases", "200", "--mem-sessions", "4", "--settle", "0"}, figures: []string{"leader RSS after", "leader heap in use after", "setup grants/s"}},
	} {
		t.Run(tc.workload, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			var out bytes.Buffer
			args := append(append(append([]string{}, common...), "--workload", tc.workload), tc.args...)
			if err := run(ctx, args, &out); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "r.json")
			if err := os.WriteFile(file, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			rs, err := readReports(file)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].Workload != tc.workload {
				t.Fatalf("results %+v, want one of %s", rs, tc.workload)
			}
			for _, name := range tc.figures {
				if f, ok := rs[0].Figure(name); !ok || !(f.Value > 0) {
					t.Errorf("figure %q = %+v, want > 0", name, f)
				}
			}
			if tc.workload == "memory" {
				if _, ok := rs[0].Figure("leader RSS per live lease"); !ok {
					t.Errorf("no leader RSS per live lease")
				}
			}
		})
	}
}

// etcdClient starts an etcd member and returns a client of it and a
// context bounded by timeout; both end with the test.
func etcdClient(t *testing.T) (context.Context, *clientv3.Client) {
	t.Helper()
	m := startEtcd(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	cli, err := newClient(m.url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return ctx, cli
}

// A release whose lock key is gone (its session's lease expired or was
// revoked) is a violation, not a release.
func TestMutexReleaseGoneKey(t *testing.T) {
	ctx, cli := etcdClient(t)
	s, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := &mutexLock{cli: cli, m: concurrency.NewMutex(s, "/test/gone")}
	token, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Delete(ctx, l.m.Key()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx, token); !errors.Is(err, bench.ErrViolation) {
		t.Errorf("release of a gone key: %v, want ErrViolation", err)
	}
}

// A keepalive etcd answers with TTL 0 (the lease is gone) is a lost lease.
func TestKeepAliveLostLease(t *testing.T) {
	ctx, cli := etcdClient(t)
	g, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	b := &etcdBench{cfg: etcdConfig{inFlight: 1}}
	_, err = b.renewLoop(ctx, cli, clientv3.LeaseID(g.ID), bench.NewWindow(0, time.Minute))
	if !errors.Is(err, bench.ErrViolation) {
		t.Errorf("keepalive of a revoked lease: %v, want ErrViolation", err)
	}
}
