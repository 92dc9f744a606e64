package cli

import (
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

// socketPath is the socket the client dials, for children's environment.
func (c *clientFlags) socketPath() string {
	if c.socket != "" {
		return c.socket
	}
	return ipc.ClientSocketPath()
}
