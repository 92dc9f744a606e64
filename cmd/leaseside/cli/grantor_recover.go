package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/grantor"
)

// recoverOutput is what `grantor recover --json` prints.
type recoverOutput struct {
	DataDir string `json:"data_dir"`
	// Skipped describes the entry --skip-index replaced, when given.
	Skipped *skippedEntry      `json:"skipped,omitempty"`
	Log     *grantor.LogReport `json:"log"`
}

// skippedEntry is the entry `grantor recover --skip-index` replaced.
type skippedEntry struct {
	Index uint64 `json:"index"`
	Term  uint64 `json:"term"`
	// Type is the entry's command type (its first byte).
	Type int `json:"type"`
}

func newGrantorRecoverCmd(e *env) *cobra.Command {
	var dataDir string
	var skip, upTo uint64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "recover --data-dir DIR [--skip-index N]",
		Short: "inspect a stopped grantor's raft log, or skip the entry it halted on",
		Long: `Works on the data dir of a stopped grantor (it refuses one a grantor runs on).

Without --skip-index it replays the newest snapshot and the raft log offline
and prints where it stands: the log's first and last index, the last index
applied, the entry the grantor halts on (if any), the highest token, the
grants held and a digest of the state. Replicas whose replays reach the same
index have the same digest.

With --skip-index N it first replaces raft log entry N by a raft no-op of
the same index and term, then prints the same report. It skips only an entry
this grantor cannot apply (the one it halted on, exit status 65), never a
valid command. Run it with the same N on EVERY replica while every grantor
is stopped, and start them again: each then passes over entry N and applies
the same entries, so the replicas stay identical. See
docs/operations-recovery.md.`,
		Example: `  leaseside grantor recover --data-dir /var/lib/leaseside/grantor
  leaseside grantor recover --data-dir /var/lib/leaseside/grantor --skip-index 1234 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dataDir == "" {
				return usagef("grantor recover: --data-dir is required")
			}
			return runGrantorRecover(e, dataDir, skip, upTo, asJSON)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "data dir of the stopped grantor")
	cmd.Flags().Uint64Var(&skip, "skip-index", 0, "replace this raft log entry, one the grantor cannot apply, by a no-op (on every replica)")
	cmd.Flags().Uint64Var(&upTo, "up-to", 0, "replay the log only up to this index (compare replicas at an index they all hold); 0: all of it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	return cmd
}

// runGrantorRecover skips entry skip (when not 0) of the grantor in
// dataDir, then reports on its log.
func runGrantorRecover(e *env, dataDir string, skip, upTo uint64, asJSON bool) error {
	out := recoverOutput{DataDir: dataDir}
	if skip > 0 {
		old, err := grantor.SkipEntry(dataDir, skip)
		if err != nil {
			if errors.Is(err, grantor.ErrEntryApplies) {
				fmt.Fprintf(e.stderr, "leaseside: grantor recover: %v: not skipped\n", err)
				return exitCode(ExitError)
			}
			return fail(e, err)
		}
		out.Skipped = &skippedEntry{Index: old.Index, Term: old.Term}
		if len(old.Data) > 0 {
			out.Skipped.Type = int(old.Data[0])
		}
	}
	rep, err := grantor.InspectDataDir(dataDir, upTo)
	if err != nil {
		return fail(e, err)
	}
	out.Log = rep
	if asJSON {
		printJSON(e.stdout, out)
		return nil
	}
	var b strings.Builder
	if s := out.Skipped; s != nil {
		fmt.Fprintf(&b, "skipped raft log entry %d (term %d, command type %d): it is a no-op now\n", s.Index, s.Term, s.Type)
	}
	fmt.Fprintf(&b, "raft log %d..%d, snapshot at %d, applied through %d\n", rep.FirstIndex, rep.LastIndex, rep.SnapshotIndex, rep.Applied)
	if rep.HaltMessage != "" {
		fmt.Fprintf(&b, "halts at: %s\n", rep.HaltMessage)
	}
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(&b, "entries skipped by recover: %v\n", rep.Skipped)
	}
	fmt.Fprintf(&b, "state: last token %d, %d grants held, %s\n", rep.LastToken, rep.Leases, rep.Digest)
	fmt.Fprint(e.stdout, b.String())
	return nil
}
