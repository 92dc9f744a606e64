package cli

import (
	"context"
	"time"

	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/ipc"
)

// clientFlags are the flags every subcommand that talks to the daemon has.
type clientFlags struct {
	socket  string
	json    bool
	timeout time.Duration
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
