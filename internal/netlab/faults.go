package netlab

import (
	"fmt"
	"strconv"
)

// Faults are made on the switch: every host's port is on one bridge, and
// a partition moves ports to a bridge of their own (an island). Packets
// between islands are dropped silently, both ways, like a cut cable
// between two switches: nothing is reset, established TCP connections
// stall and retransmit, new ones time out (hosts know one another's MAC
// addresses statically, so no ARP failure turns that into "no route to
// host"). Hosts keep their carrier and addresses, so programs on them
// notice nothing but silence.

// Partition cuts the listed hosts off from every other host, in both
// directions; the listed hosts still reach one another. Each call makes a
// new island: Partition(0) then Partition(1) leaves hosts 0 and 1 cut off
// from each other and from the rest, and a host listed again moves to the
// new island. Heal undoes all partitions.
func (l *Lab) Partition(group ...int) {
	l.t.Helper()
	if len(group) == 0 {
		l.t.Fatal("netlab: Partition of no hosts")
	}
	for _, i := range group {
		if i < 0 || i >= len(l.hosts) {
			l.t.Fatalf("netlab: Partition of host %d in a lab of %d", i, len(l.hosts))
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	island := "island" + strconv.Itoa(len(l.islands)+1)
	cmds := []string{"link add " + island + " type bridge", "link set " + island + " up"}
	for _, i := range group {
		cmds = append(cmds, fmt.Sprintf("link set %s master %s", l.hosts[i].port(), island))
	}
	if err := l.ip(l.sw, cmds...); err != nil {
		l.t.Fatalf("netlab: Partition(%v): %v", group, err)
	}
	l.islands = append(l.islands, island)
}

// Isolate cuts host i off from all the others: Partition(i).
func (l *Lab) Isolate(i int) {
	l.t.Helper()
	l.Partition(i)
}

// Heal reconnects every host to every other, undoing all partitions and
// one-way blocks. Connections that stalled resume when TCP next
// retransmits.
func (l *Lab) Heal() {
	l.t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.healBlocksLocked(); err != nil {
		l.t.Fatalf("netlab: Heal: %v", err)
	}
	if len(l.islands) == 0 {
		return
	}
	var cmds []string
	for _, h := range l.hosts {
		cmds = append(cmds, "link set "+h.port()+" master main")
	}
	for _, island := range l.islands {
		cmds = append(cmds, "link del "+island)
	}
	if err := l.ip(l.sw, cmds...); err != nil {
		l.t.Fatalf("netlab: Heal: %v", err)
	}
	l.islands = nil
}
