package chaos

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/internal/chaos/workload"
)

// register is the protected resource of a run: one fenced register per
// lease name (fence.Register), served on a Unix socket to the clients of
// every host (a socket path reaches across network namespaces, so no
// partition ever cuts a client off from it: the worst case for fencing).
//
// It checks what a careful resource on the holders' machine can check:
// the writer's deadline first, on the CLOCK_BOOTTIME they share (a write
// that arrives after the deadline its writer sent is refused as "late"),
// then the token (a write with a token below the highest the register
// accepted is refused as "stale"). Every write and its answer go to the
// history, stamped under the register's lock, so their order is the
// order in which the register decided.
//
// With a store (Config.Store), the store decides on the token instead of
// a fence.Register: each write is a fenced transaction in it.
type register struct {
	ln    net.Listener
	rec   *recorder
	store *pgStore // nil: in this process's memory

	mu     sync.Mutex
	regs   map[string]*fence.Register
	writes map[string]uint64 // writes each register was given: its last Seq
	wg     sync.WaitGroup
}

// maxWriteLine bounds a write request's line.
const maxWriteLine = 4096

func newRegister(path string, rec *recorder, store *pgStore) (*register, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	r := &register{ln: ln, rec: rec, store: store, regs: map[string]*fence.Register{}, writes: map[string]uint64{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *register) serve() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.handle(c)
		}()
	}
}

// handle answers the writes of one connection, one JSON line each.
func (r *register) handle(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, maxWriteLine), maxWriteLine)
	for sc.Scan() {
		var w workload.Write
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil || w.Name == "" {
			return
		}
		b, _ := json.Marshal(r.write(w))
		if _, err := c.Write(append(b, '\n')); err != nil {
			return
		}
	}
}

// write decides on w and records it.
func (r *register) write(w workload.Write) workload.WriteReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	rw := RegisterWrite{Write: w, At: boottime()}
	switch {
	case rw.At >= w.Deadline:
		rw.Reason = "late"
	case r.store != nil:
		r.writes[w.Name]++
		rw.Seq = r.writes[w.Name]
		switch err := r.store.write(w, rw.Seq); {
		case err == nil:
			rw.Accepted = true
		case errors.Is(err, fence.ErrStaleToken):
			rw.Reason = "stale"
		default:
			rw.Reason = storeErrPrefix + err.Error()
		}
	default:
		reg := r.regs[w.Name]
		if reg == nil {
			reg = fence.NewRegister(w.Name)
			r.regs[w.Name] = reg
		}
		err := reg.Write(w.Holder, w.Token, registerValue(w))
		r.writes[w.Name]++
		rw.Seq = r.writes[w.Name]
		switch {
		case err == nil:
			rw.Accepted = true
		case errors.Is(err, fence.ErrStaleToken):
			rw.Reason = "stale"
		default:
			rw.Reason = err.Error()
		}
	}
	r.rec.write(rw)
	return workload.WriteReply{Accepted: rw.Accepted, Reason: rw.Reason}
}

// close stops serving and waits for the connections to end.
func (r *register) close() {
	r.ln.Close()
	r.wg.Wait()
}
