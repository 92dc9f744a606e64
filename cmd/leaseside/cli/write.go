package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/fence"
	"github.com/leaseside/leaseside/ipc"
)

func newWriteCmd(e *env) *cobra.Command {
	var cf clientFlags
	var token string
	cmd := &cobra.Command{
		Use:   "write NAME PATH",
		Short: "replace a file with stdin, fenced: refused (exit 4) if a newer token of NAME wrote it",
		Long: `Replaces the file PATH with what stdin holds, only if the caller's token for
the lease NAME is not lower than the highest token of NAME that has
written PATH; otherwise nothing changes and it exits 4, naming both
tokens. A holder that paused past its deadline, whose lease went to
another holder who wrote since, is refused here.

The token is --token if given, else $LEASESIDE_TOKEN when $LEASESIDE_LEASE
is NAME (inside 'leaseside run NAME'), else the token of NAME held on this
host, asked of the daemon (exit 3 if it holds none). Only the token is
compared: the lease need not be valid any more, the fence is what decides.

Stdin goes to a temporary file beside PATH and is synced; then, under an
exclusive lock (flock) on PATH.leaseside-fence, which keeps the highest
token per lease, the token is checked and recorded durably, the temporary
file renamed over PATH and the directory synced. Readers see the old file
or the new one, whole. It holds on a local filesystem, and on NFS only
where its locks work (NFSv4, or v3 with lockd), as long as every writer
of PATH uses 'leaseside write'. A replaced file keeps its mode; a new one
gets 0666 less the umask. PATH must not be a symbolic link.`,
		Example: `  leaseside write jobs/report /srv/report.csv < report.csv   # inside 'leaseside run jobs/report'
  leaseside write jobs/report /srv/state --token 41 <<< done
  leaseside write jobs/report /srv/report.csv --json < report.csv`,
		Args: exactArgs("NAME", "PATH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] == "" {
				return usagef("PATH is empty")
			}
			return runWrite(cmd.Context(), e, &cf, args[0], args[1], token, cmd.InOrStdin())
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&token, "token", "", "write under this token (default $LEASESIDE_TOKEN inside 'run NAME', else the daemon's for NAME)")
	return cmd
}

// writeResult is what --json prints.
type writeResult struct {
	Path    string `json:"path"`
	Lease   string `json:"lease"`
	Token   string `json:"token"`
	Written bool   `json:"written"`
	// Highest is the highest token of the lease recorded for the path,
	// when the write was refused.
	Highest string `json:"highest,omitempty"`
	// Error is why it was refused (code stale_token), as every client
	// command's --json says a failure.
	Error any `json:"error,omitempty"`
}

// writeFail prints msg (and with --json the failure on stdout, as every
// client command does) and returns code.
func writeFail(e *env, cf *clientFlags, err error, name string, code int, msg string) error {
	if cf.json {
		printJSON(e.stdout, newJSONError(err, asked{lease: name}, code, msg))
	}
	if code == ExitUsage {
		return usagef("%s", msg)
	}
	fmt.Fprintf(e.stderr, "leaseside: %s\n", msg)
	return exitCode(code)
}

func runWrite(ctx context.Context, e *env, cf *clientFlags, name, path, flagToken string, stdin io.Reader) error {
	tok, err := writeToken(ctx, e, cf, name, flagToken)
	if err != nil {
		return err
	}
	res := writeResult{Path: path, Lease: name, Token: strconv.FormatUint(tok, 10)}
	err = fence.WriteFile(path, name, tok, stdin)
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		msg := fmt.Sprintf("write to %s refused: token %d of %s is stale, token %d has written it since (this holder lost the lease)",
			path, tok, name, stale.Highest)
		if cf.json {
			j := newJSONError(err, asked{lease: name}, ExitStale, msg)
			j.Error.Code = "stale_token"
			res.Highest, res.Error = strconv.FormatUint(stale.Highest, 10), j.Error
			printJSON(e.stdout, res)
		}
		fmt.Fprintf(e.stderr, "leaseside: %s\n", msg)
		return exitCode(ExitStale)
	case errors.Is(err, fence.ErrNotRegular):
		return writeFail(e, cf, err, name, ExitUsage, "PATH: "+err.Error())
	case err != nil:
		return writeFail(e, cf, err, name, ExitError, err.Error())
	}
	res.Written = true
	if cf.json {
		printJSON(e.stdout, res)
	}
	return nil
}

// writeToken is the token a write goes under: --token, else the one run
// gave the environment for this lease, else the daemon's.
func writeToken(ctx context.Context, e *env, cf *clientFlags, name, flagToken string) (uint64, error) {
	from, s := "--token", flagToken
	if s == "" && os.Getenv(EnvLease) == name && os.Getenv(EnvToken) != "" {
		from, s = "$"+EnvToken, os.Getenv(EnvToken)
	}
	if s != "" {
		t, err := strconv.ParseUint(s, 10, 64)
		if err != nil || t == 0 {
			return 0, usagef("%s %q: a token is a positive decimal integer", from, s)
		}
		return t, nil
	}
	ctx, c, done := cf.connect(ctx)
	defer done()
	g, err := c.Check(ctx, name, "")
	if err != nil {
		if ie, ok := err.(*ipc.Error); ok && (ie.Code == ipc.CodeNotHeld || ie.Code == ipc.CodeLost) {
			return 0, writeFail(e, cf, err, name, ExitNotHeld,
				fmt.Sprintf("no token to write under: %s (run the writer under 'leaseside run %s', or give --token)", ie.Message, name))
		}
		return 0, cf.fail(e, err, asked{lease: name})
	}
	t, err := strconv.ParseUint(g.Token, 10, 64)
	if err != nil || t == 0 {
		return 0, writeFail(e, cf, nil, name, ExitError, fmt.Sprintf("the daemon answered token %q for %s", g.Token, name))
	}
	return t, nil
}
