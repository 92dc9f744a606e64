package integration

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin is the leaseside binary built once for the package.
var bin string

// raceBuild says bin is built with the race detector (the default): its
// shadow memory, hundreds of MiB of a flooded grantor's RSS that grow
// with every heap page the grantor touches, is then part of any RSS a
// test reads.
var raceBuild bool

// The tests call t.Parallel: each has processes, directories, sockets and
// ports (freeLoopbackPorts) of its own, and mostly waits on them (terms,
// lock-delays, elections, child processes): its processes use about half
// a core on average. So parallel of them run at once unless
// -test.parallel says otherwise (GOMAXPROCS, go test's default, is 2 on
// CI's machine). The few tests that do not call t.Parallel say why; in
// their time nothing else of the package runs.
const parallel = 3

func TestMain(m *testing.M) {
	if socket := os.Getenv(helloEnv); socket != "" {
		os.Exit(helloChild(socket)) // this binary started again as a client
	}
	dir, err := os.MkdirTemp("", "leaseside-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "leaseside")
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(parallel))
	}
	race := "-race"
	// Measurements take the binary as shipped: the race detector's
	// shadow memory alone is hundreds of MiB of a flooded grantor's RSS,
	// which the Go runtime neither counts nor gives back.
	if *measureFailover || *measureLoad || *measurePrims || os.Getenv("LEASESIDE_ATTACK_FULL") == "1" {
		race = "-race=false"
	}
	raceBuild = race == "-race"
	build := exec.Command("go", "build", race, "-o", bin, "github.com/leaseside/leaseside/cmd/leaseside")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building leaseside:", err)
		os.Exit(1)
	}
	// The race detector sleeps 1s in every instrumented process before it
	// exits (GORACE atexit_sleep_ms); the processes these tests start do
	// not need it, and it would count in every stop the tests measure.
	if _, set := os.LookupEnv("GORACE"); !set {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// timeout bounds every wait on an event in these tests: generous, because
// the machine is shared and slow at times; passing tests never reach it.
const timeout = 60 * time.Second

// devProc is a running `leaseside dev`.
type devProc struct {
	cmd    *exec.Cmd
	socket string
	data   string
	log    *bytes.Buffer
	exited chan error
	// grantorRPC is the address its grantor serves on, from its ready
	// line: with --rpc-addr 127.0.0.1:0, the port the grantor chose.
	grantorRPC string
	// metrics hears the host:port of its metrics (--metrics-addr
	// 127.0.0.1:0 lets it choose one), from its log.
	metrics chan string
}

var (
	devRPCRE     = regexp.MustCompile(`\bgrantor_rpc=(\S+)`)
	devMetricsRE = regexp.MustCompile(`serving metrics.*\baddr=http://([^/\s]+)/`)
)

// metricsAddr waits for the host:port p serves its metrics on, which p
// chose itself (start it with --metrics-addr 127.0.0.1:0): a port picked
// free by the test could be taken by another process before p binds it.
func (p *devProc) metricsAddr(t *testing.T) string {
	t.Helper()
	select {
	case a := <-p.metrics:
		return a
	case <-time.After(timeout):
		t.Fatalf("leaseside dev logged no metrics address in %v", timeout)
	}
	return ""
}

// startDev starts `leaseside dev` and waits for its ready line.
func startDev(t *testing.T, socket, data string, extra ...string) *devProc {
	t.Helper()
	return startDevCmd(t, socket, data, exec.Command(bin, append([]string{"dev", "--socket", socket, "--data-dir", data}, extra...)...))
}

// startDevInNetns starts `leaseside dev` in a network namespace of its
// own, its grantor on the namespace's loopback (--rpc-addr; by default dev
// uses a Unix socket), so that a test can cut its loopback (and so its
// grantor) off.
func startDevInNetns(t *testing.T, socket, data string, extra ...string) *devProc {
	t.Helper()
	args := append([]string{"--net", "sh", "-c", `ip link set lo up && exec "$@"`, "sh", bin, "dev", "--socket", socket, "--data-dir", data,
		"--rpc-addr", "127.0.0.1:0", "--insecure"}, extra...)
	return startDevCmd(t, socket, data, exec.Command("unshare", args...))
}

// netnsLoopback sets the loopback of the namespace p runs in up or down.
func (p *devProc) netnsLoopback(t *testing.T, state string) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(p.cmd.Process.Pid)+"/ns/net", "ip", "link", "set", "lo", state).CombinedOutput()
	if err != nil {
		t.Fatalf("ip link set lo %s: %v: %s", state, err, out)
	}
}

func startDevCmd(t *testing.T, socket, data string, cmd *exec.Cmd) *devProc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &devProc{cmd: cmd, socket: socket, data: data, log: &bytes.Buffer{}, exited: make(chan error, 1), metrics: make(chan string, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			p.log.WriteString(sc.Text() + "\n")
			if !signalled && strings.Contains(sc.Text(), "leaseside dev ready") {
				if m := devRPCRE.FindStringSubmatch(sc.Text()); m != nil {
					p.grantorRPC = m[1]
				}
				close(ready)
				signalled = true
			}
			if m := devMetricsRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case p.metrics <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("leaseside dev log:\n%s", p.log.String())
		}
	})
	select {
	case <-ready:
	case err := <-p.exited:
		p.exited <- err
		t.Fatalf("leaseside dev exited before ready: %v\n%s", err, p.log.String())
	case <-time.After(timeout):
		t.Fatalf("leaseside dev not ready after %v\n%s", timeout, p.log.String())
	}
	return p
}

// stop sends SIGTERM and waits for a clean exit.
func (p *devProc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Fatalf("leaseside dev exited with %v after SIGTERM", err)
		}
	case <-time.After(timeout):
		t.Fatal("leaseside dev did not stop on SIGTERM")
	}
}

// result is what a CLI invocation did.
type result struct {
	code           int
	stdout, stderr string
}

// cli runs the leaseside CLI against socket and waits for it.
func cli(t *testing.T, socket string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append([]string{args[0], "--socket", socket}, args[1:]...)
	cmd := exec.CommandContext(ctx, bin, full...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("leaseside %v: %v", args, err)
	}
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

func (r result) must(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// tempSocket returns a socket path short enough for sun_path.
func tempSocket(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "s.sock")
}
