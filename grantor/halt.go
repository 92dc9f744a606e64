package grantor

// halt is the FSM's onHalt: the node met a raft log entry it cannot apply
// (fsm.go). It logs why, stops acknowledging anything at once (the lessor
// acts on a state that lacks the entry), and makes Run return the
// *HaltError, which matches ErrHalted, so that the CLI exits with its own
// code and a service manager does not restart it into the same entry.
func (n *Node) halt(h *HaltError) {
	n.log.Error(h.Error(), "index", h.Index, "type", h.Type)
	n.lessor.stop()
	close(n.halted)
}
