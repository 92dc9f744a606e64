package netlab

import (
	"fmt"
	"slices"
)

// One-way faults are made on the switch too, on the port that leads to
// the receiving host: an HTB qdisc there sends what the host may receive
// to class 1:1, and a u32 filter on the sender's address sends the rest to
// class 1:2, whose queue (a pfifo of length 0) drops every packet. The
// receiver hears nothing from the sender, the sender hears the receiver
// as before: a connection from either side stalls (its handshake or its
// acknowledgements are lost), a datagram gets through one way only.

// Block drops every packet from host from to host to, one way: to still
// reaches from. Blocks add up (Block(0, 1) and Block(1, 0) is a cut both
// ways); Heal undoes them with the partitions.
func (l *Lab) Block(from, to int) {
	l.t.Helper()
	for _, i := range []int{from, to} {
		if i < 0 || i >= len(l.hosts) {
			l.t.Fatalf("netlab: Block(%d, %d) in a lab of %d", from, to, len(l.hosts))
		}
	}
	if from == to {
		l.t.Fatalf("netlab: Block(%d, %d): a host cannot be cut off from itself", from, to)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.Contains(l.blocks[to], from) {
		return
	}
	port := l.hosts[to].port()
	var cmds []string
	if len(l.blocks[to]) == 0 {
		cmds = append(cmds,
			fmt.Sprintf("qdisc add dev %s root handle 1: htb default 1", port),
			fmt.Sprintf("class add dev %s parent 1: classid 1:1 htb rate 100gbit quantum 60000", port),
			fmt.Sprintf("class add dev %s parent 1: classid 1:2 htb rate 100gbit quantum 60000", port),
			fmt.Sprintf("qdisc add dev %s parent 1:2 handle 2: pfifo limit 0", port))
	}
	cmds = append(cmds, fmt.Sprintf("filter add dev %s parent 1: protocol ip prio 1 u32 match ip src %s/32 flowid 1:2", port, l.hosts[from].addr))
	if err := l.tc(cmds...); err != nil {
		l.t.Fatalf("netlab: Block(%d, %d): %v", from, to, err)
	}
	if l.blocks == nil {
		l.blocks = map[int][]int{}
	}
	l.blocks[to] = append(l.blocks[to], from)
}

// healBlocksLocked removes every one-way block. The caller holds l.mu.
func (l *Lab) healBlocksLocked() error {
	var cmds []string
	for to := range l.blocks {
		cmds = append(cmds, fmt.Sprintf("qdisc del dev %s root", l.hosts[to].port()))
	}
	if len(cmds) == 0 {
		return nil
	}
	if err := l.tc(cmds...); err != nil {
		return err
	}
	l.blocks = nil
	return nil
}
