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
	pos, code := parseArgs(fs, e.args, 1)
	if code >= 0 {
		return code
	}
	ctx, c, done := cf.connect(ctx)
	defer done()
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
