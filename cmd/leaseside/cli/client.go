package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/ipc"
)

// clientFlags are the flags every subcommand that talks to the daemon has.
type clientFlags struct {
	socket  string
	json    bool
	timeout time.Duration
	// conflictCode, when set (--conflict-exit-code, commands with
	// --wait), is the exit code for a lease held elsewhere, instead of
	// ExitHeld.
	conflictCode *int
}

// register adds --socket, --json and --timeout to fs; withWait says the
// command also has --wait, which --timeout comes on top of.
func (c *clientFlags) register(fs *pflag.FlagSet, withWait bool) {
	fs.StringVar(&c.socket, "socket", "", "daemon socket (default $"+ipc.SocketEnv+", else "+ipc.SystemSocketPath+
		" as root; for other users their own daemon's, else "+ipc.SystemSocketPath+"; see 'leaseside help dev')")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	help := "give up on the daemon after this long"
	if withWait {
		help += " (on top of --wait)"
		fs.Var(conflictCodeValue{&c.conflictCode}, "conflict-exit-code", "exit with this code (0 to 255) when the lease is held elsewhere and --wait ran out, instead of 75 (as flock -E)")
	}
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, help)
}

func (c *clientFlags) client() *ipc.Client { return &ipc.Client{Socket: c.socket} }

// connect returns a client of the daemon and ctx bounded by --timeout;
// done closes both.
func (c *clientFlags) connect(ctx context.Context) (context.Context, *ipc.Client, func()) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	cl := c.client()
	return ctx, cl, func() {
		cl.Close()
		cancel()
	}
}

// socketPath is the socket the client dials, for children's environment.
func (c *clientFlags) socketPath() string {
	if c.socket != "" {
		return c.socket
	}
	return ipc.ClientSocketPath()
}

// conflictCodeValue is --conflict-exit-code: an exit code, 0 to 255.
type conflictCodeValue struct{ p **int }

func (v conflictCodeValue) String() string {
	if v.p == nil || *v.p == nil {
		return "75"
	}
	return strconv.Itoa(**v.p)
}

func (v conflictCodeValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 255 {
		return fmt.Errorf("an exit code is a number from 0 to 255")
	}
	*v.p = &n
	return nil
}

func (conflictCodeValue) Type() string { return "code" }
