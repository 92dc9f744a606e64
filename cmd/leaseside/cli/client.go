package cli

import (
	"context"
	"flag"
	"time"

	"github.com/leaseside/leaseside/ipc"
)

// clientFlags are the flags every subcommand that talks to the daemon has.
type clientFlags struct {
	socket  string
	json    bool
	timeout time.Duration
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.socket, "socket", "", "daemon socket (default $"+ipc.SocketEnv+", else "+ipc.ClientSocketPath()+")")
	fs.BoolVar(&c.json, "json", false, "print JSON")
	fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up on the daemon after this long (on top of --wait)")
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
