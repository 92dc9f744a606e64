package cli

import (
	"context"
	"fmt"
)

func runRelease(ctx context.Context, e *env) int {
	fs := newFlags(e, "release", "NAME [--token T]")
	var cf clientFlags
	cf.register(fs)
	tok := fs.String("token", "", "release only if the lease still has this token")
	pos, _, err := parse(fs, e.args)
	if err != nil {
		return parseExit(err)
	}
	if len(pos) != 1 {
		fs.Usage()
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	c := cf.client()
	defer c.Close()
	if err := c.ReleaseToken(ctx, pos[0], *tok); err != nil {
		return fail(e, err)
	}
	if cf.json {
		printJSON(e.stdout, map[string]any{"lease": pos[0], "released": true})
	} else {
		fmt.Fprintf(e.stdout, "released %s\n", pos[0])
	}
	return ExitOK
}
