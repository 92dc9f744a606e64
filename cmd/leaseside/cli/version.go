package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/leaseside/leaseside/ipc"
)

func runVersion(ctx context.Context, e *env) int {
	fs := newFlags(e, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, _, err := parse(fs, e.args); err != nil {
		return parseExit(err)
	}
	if *asJSON {
		printJSON(e.stdout, map[string]any{"version": Version, "protocol": ipc.ProtocolVersion, "go": runtime.Version()})
	} else {
		fmt.Fprintf(e.stdout, "leaseside %s (protocol %d, %s)\n", Version, ipc.ProtocolVersion, runtime.Version())
	}
	return ExitOK
}
