// Command leaseside is the leaseside sidecar, grantor and client in one
// binary. Run `leaseside help` for the subcommands.
package main

import (
	"os"

	"github.com/leaseside/leaseside/cmd/leaseside/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
