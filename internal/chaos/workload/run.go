package workload

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// run acquires a lease through `leaseside run`, whose command is this
// program again, as a child that uses the lease (runChild).
func (c *client) run() {
	name, ttl := pick(c.rng, c.cfg.Names), pick(c.rng, c.cfg.TTLs)
	wait := time.Duration(c.rng.Int64N(int64(c.cfg.MaxWait)))
	op := c.nextOp()
	cmd := exec.Command(c.cfg.Leaseside, "run", name, "--ttl", ttl.String(), "--wait", wait.String(),
		"--socket", c.cfg.Socket, "--", c.cfg.Self)
	cmd.Env = append(os.Environ(), EnvRunOp+"="+op)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// run dies with its client (a kill -9 of the client), and its
	// command with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c.rec.add(Record{Kind: KindRun, Op: op, Name: name, TTLMs: ttl.Milliseconds(), WaitMs: wait.Milliseconds(), At: now()})
	err := cmd.Run()
	r := Record{Kind: KindRunExit, Op: op, Name: name, At: now()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Exit = ee.ExitCode()
	default:
		r.Exit, r.Err = -1, err.Error()
	}
	c.rec.add(r)
}

// runChild is the command of a run: it holds the lease run acquired for
// it (from LEASESIDE_* in its environment), uses it as a client does, and
// exits. On SIGTERM (run stopping it before the deadline) it records that
// it stops, between two uses, and exits.
func runChild(cfg Config, op string) {
	rec := &recorder{client: cfg.Client}
	name := os.Getenv("LEASESIDE_LEASE")
	token, _ := strconv.ParseUint(os.Getenv("LEASESIDE_TOKEN"), 10, 64)
	deadline, _ := strconv.ParseInt(os.Getenv("LEASESIDE_DEADLINE_BOOTTIME_NS"), 10, 64)
	rec.add(Record{Kind: KindChild, Op: op, Name: name, Token: token, Deadline: deadline, Pid: os.Getpid(), At: now()})

	// mu is held while the lease is used, so that the record of the end
	// comes after the last use.
	var mu sync.Mutex
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	go func() {
		<-sigs
		mu.Lock()
		rec.add(Record{Kind: KindChildEnd, Op: op, Name: name, Token: token, Code: "sigterm", At: now()})
		os.Exit(143)
	}()

	h := fnv.New64a()
	h.Write([]byte(op))
	rng := rand.New(rand.NewPCG(cfg.Seed, h.Sum64()))
	until := now() + rng.Int64N(int64(cfg.MaxHold))
	cl := &ipc.Client{Socket: os.Getenv("LEASESIDE_SOCKET")}
	reg := &register{path: cfg.Register}
	for {
		mu.Lock()
		if now() >= deadline {
			rec.add(Record{Kind: KindGone, Op: op, Name: name, Token: token, Code: CodeDeadline, At: now()})
			break
		}
		reg.write(Write{Name: name, Holder: op, Token: token, Deadline: deadline, Kind: "pre"})
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		at := now()
		g, err := cl.Check(ctx, name, strconv.FormatUint(token, 10))
		r := Record{Kind: KindCheck, Op: op, Name: name, Token: token, At: at, End: now()}
		if err != nil {
			r.Code, r.Err = code(err, ctx.Err() != nil), err.Error()
			cancel()
			rec.add(r)
			rec.add(Record{Kind: KindGone, Op: op, Name: name, Token: token, Code: r.Code, At: r.End})
			break
		}
		cancel()
		r.Deadline = g.DeadlineBoottimeNs
		rec.add(r)
		deadline = max(deadline, g.DeadlineBoottimeNs)
		reg.write(Write{Name: name, Holder: op, Token: token, Deadline: g.DeadlineBoottimeNs, Kind: "post"})
		if now() > until {
			break
		}
		mu.Unlock()
		time.Sleep(time.Duration(20+rng.IntN(280)) * time.Millisecond)
	}
	rec.add(Record{Kind: KindChildEnd, Op: op, Name: name, Token: token, At: now()})
	cl.Close()
	os.Exit(0)
}
