package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/ipc"
)

func newVersionCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Long:  `Prints the leaseside version, the socket protocol version and the Go version it was built with (as --version).`,
		Example: `  leaseside version
  leaseside version --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if asJSON {
				printJSON(e.stdout, map[string]any{"version": Version, "protocol": ipc.ProtocolVersion, "go": runtime.Version()})
			} else {
				fmt.Fprintln(e.stdout, versionLine())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
