package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/leaseside/leaseside/ipc"
)

// waitValue is a --wait flag: a duration, or "forever" (ipc.WaitForever)
// to wait without a limit, as flock and etcdctl lock do.
type waitValue struct{ d *time.Duration }

func (w waitValue) String() string {
	if w.d == nil {
		return "0s"
	}
	if *w.d == ipc.WaitForever {
		return "forever"
	}
	return w.d.String()
}

func (w waitValue) Set(s string) error {
	if s == "forever" {
		*w.d = ipc.WaitForever
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration (30s, 5m, 2h) or forever")
	}
	if d < 0 {
		return fmt.Errorf("must be 0s or more, or forever")
	}
	*w.d = d
	return nil
}

func (waitValue) Type() string { return "duration|forever" }

// waitFlag adds --wait to fs.
func waitFlag(fs *pflag.FlagSet, d *time.Duration, usage string) {
	fs.Var(waitValue{d}, "wait", usage)
}

// withWait bounds ctx by wait plus timeout, or by nothing more when wait
// is forever.
func withWait(ctx context.Context, wait, timeout time.Duration) (context.Context, context.CancelFunc) {
	if wait == ipc.WaitForever {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, wait+timeout)
}

// waitText is --wait's value as the user wrote it.
func waitText(d time.Duration) string {
	if d == ipc.WaitForever {
		return "forever"
	}
	return fmtDuration(d)
}
