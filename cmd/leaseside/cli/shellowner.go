package cli

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The default owner of `leaseside acquire` is the process that called it:
// a shell, or a script. A shell runs some commands in a forked copy of
// itself that ends as soon as the command does: the subshell of a command
// substitution, tok=$(leaseside acquire X | tr -d '\n'), or of a process
// substitution. Binding the lease to that copy would release it a few
// milliseconds later, with the token already in the variable. So the owner
// is the nearest ancestor that is not such a subshell: while the parent is
// a fork of its own parent (the same executable and command line) and
// that parent reads the fork's output (holds the pipe the fork's stdout
// writes to), the owner moves up to that parent, the shell the assignment
// happens in. A subshell whose output nobody above reads, ( acquire; work )
// or one end of a pipeline, stays the owner: it lives as long as its work.

// maxShellHops bounds the walk up (nested substitutions).
const maxShellHops = 8

// defaultOwner returns the pid a plain `acquire` binds its lease to,
// starting from its parent ppid.
func defaultOwner(ppid int) (owner int) {
	owner = ppid
	for range maxShellHops {
		up, ok := parentOf(owner)
		if !ok || up <= 1 || !forkOf(owner, up) || !readsStdout(up, owner) {
			break
		}
		owner = up
	}
	return owner
}

// parentOf reads pid's parent from proc/PID/stat.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, false
	}
	p, err := strconv.Atoi(f[1])
	return p, err == nil
}

// forkOf reports whether child runs the same executable with the same
// command line as parent: a forked subshell, which never exec'd.
func forkOf(child, parent int) bool {
	exe := func(pid int) string {
		s, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		return s
	}
	cmdline := func(pid int) []byte {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return b
	}
	e := exe(child)
	c := cmdline(child)
	return e != "" && e == exe(parent) && len(c) > 0 && bytes.Equal(c, cmdline(parent))
}

// readsStdout reports whether reader holds the pipe that writer's stdout
// is: the shell that collects a substitution's output.
func readsStdout(reader, writer int) bool {
	out, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/1", writer))
	if err != nil || !strings.HasPrefix(out, "pipe:") {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", reader)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == out {
			return true
		}
	}
	return false
}
