package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/daemon"
	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// leasesOutput is what `leases --json` prints.
type leasesOutput struct {
	Leases []ipc.ClusterLease `json:"leases"`
}

func newLeasesCmd(e *env) *cobra.Command {
	var cf clientFlags
	var grantors, prefix string
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "leases",
		Short: "list every lease of the cluster: holder, token, remaining term, waiters",
		Long: `Lists the leases of the whole cluster as the grantor leader sees them: for
each name its grants (token, the holder's identity, how long the grant runs
at the leader unless renewed), how many acquires wait for it, its LIMIT
(1 exclusive, more a semaphore, 'shared' for the shared grants of a
read/write lock), and its lock-delays (a name nobody may take until the
delay ends).

With --grantors it asks the grantors with the certificate of --tls-cert (an
operator's; the leader is found from any of them). Without it, the local
sidecar relays the question, for root or the daemon's user only, and the
leader lists what the sidecar's certificate may read under the grantors'
name rules.`,
		Example: `  sudo leaseside leases --prefix jobs/
  leaseside leases --grantors 192.0.2.10:7401 --tls-ca ca.pem --tls-cert op.pem --tls-key op-key.pem --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			creds, err := tf.credentials()
			if err != nil {
				return fail(e, err)
			}
			return runLeases(cmd.Context(), e, &cf, splitList(grantors), prefix, creds)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&grantors, "grantors", "", "comma-separated gRPC addresses of grantors to ask (default: the local sidecar)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "only names that start with this")
	tf.register(cmd.Flags(), false)
	return cmd
}

// runLeases lists the cluster's leases, page by page.
func runLeases(ctx context.Context, e *env, cf *clientFlags, addrs []string, prefix string, creds credentials.TransportCredentials) error {
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	out := leasesOutput{Leases: []ipc.ClusterLease{}}
	var c *ipc.Client
	if len(addrs) == 0 {
		c = cf.client()
		defer c.Close()
	}
	after := ""
	for {
		var page []ipc.ClusterLease
		var more bool
		if c != nil {
			var err error
			if page, more, err = c.ClusterLeases(ctx, prefix, after); err != nil {
				return cf.fail(e, err, asked{})
			}
		} else {
			var resp *grantorpb.LeasesResponse
			err := onLeader(ctx, creds, addrs, func(ctx context.Context, g grantorpb.GrantorClient) (err error) {
				resp, err = g.Leases(ctx, &grantorpb.LeasesRequest{Prefix: prefix, After: after})
				return err
			})
			if err != nil {
				return operatorFail(e, "leases", err, creds)
			}
			page, more = daemon.ClusterLeasesFromPB(resp.Leases), resp.More
		}
		out.Leases = append(out.Leases, page...)
		if !more || len(page) == 0 {
			break
		}
		after = page[len(page)-1].Lease
	}
	if cf.json {
		printJSON(e.stdout, out)
		return nil
	}
	printLeases(e.stdout, out.Leases)
	return nil
}

// printLeases writes one line per grant, and one per lock-delay.
func printLeases(w io.Writer, leases []ipc.ClusterLease) {
	ms := func(v int64) string { return (time.Duration(v) * time.Millisecond).String() }
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LEASE\tTOKEN\tHOLDER\tREMAINING\tTERM\tWAITERS\tLIMIT")
	for _, l := range leases {
		for _, h := range l.Holders {
			limit := strconv.Itoa(l.Limit)
			if l.Shared {
				limit = "shared"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", l.Lease, h.Token, dashIfEmpty(h.Holder), ms(h.RemainingMs), ms(h.TTLMs), l.Waiters, limit)
		}
		for _, d := range l.Delays {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\n", l.Lease, d.Token, dashIfEmpty(d.Holder), ms(d.RemainingMs), "lock-delay", l.Waiters, "-")
		}
	}
	tw.Flush()
	if len(leases) == 0 {
		fmt.Fprintln(w, "no leases")
	}
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newRevokeCmd(e *env) *cobra.Command {
	var grantors string
	var token uint64
	var timeout time.Duration
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "revoke NAME --grantors ADDR,... [--token T]",
		Short: "end a lease at the grantors (an operator's certificate)",
		Long: `Ends the grants of lease NAME at the grantor leader, whoever holds them; with
--token only that grant (one holder of a semaphore, or to be sure the lease
was not handed on since you looked). It needs an operator's certificate
(--tls-cert) and --grantors; the local sidecar does not relay revokes.

The holder's sidecar learns it at its next keepalive (within a third of the
term) and reports the lease lost with reason 'revoked': 'leaseside run'
stops its command and exits 79. Since the holder may act until its
deadline, the name stays delayed for the grant's term plus its lock-delay
before anyone else gets it. The grantors' audit log records who revoked
what (event operator_revoke).

Exit 3 when nothing holds NAME or it is not held with --token.`,
		Example: `  leaseside revoke jobs/nightly --grantors 192.0.2.10:7401 --tls-ca ca.pem --tls-cert op.pem --tls-key op-key.pem
  leaseside revoke jobs/nightly --token 42 --grantors 192.0.2.10:7401 --tls-ca ca.pem --tls-cert op.pem --tls-key op-key.pem`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			addrs := splitList(grantors)
			if len(addrs) == 0 {
				return usagef("revoke needs --grantors and an operator's certificate (the local sidecar does not relay revokes)")
			}
			if cmd.Flags().Changed("token") && token == 0 {
				return usagef("--token 0: tokens start at 1")
			}
			creds, err := tf.credentials()
			if err != nil {
				return fail(e, err)
			}
			return runRevoke(cmd.Context(), e, creds, addrs, args[0], token, timeout)
		},
	}
	tf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&grantors, "grantors", "", "comma-separated gRPC addresses of grantors (any; the leader is found from them)")
	cmd.Flags().Uint64Var(&token, "token", 0, "end only the grant with this token")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// runRevoke revokes name's grants through the leader.
func runRevoke(ctx context.Context, e *env, creds credentials.TransportCredentials, addrs []string, name string, token uint64, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var resp *grantorpb.RevokeResponse
	err := onLeader(ctx, creds, addrs, func(ctx context.Context, g grantorpb.GrantorClient) (err error) {
		resp, err = g.Revoke(ctx, &grantorpb.RevokeRequest{Lease: name, Token: token})
		return err
	})
	if err != nil {
		return operatorFail(e, "revoke", err, creds)
	}
	tokens := make([]string, len(resp.Revoked))
	for i, t := range resp.Revoked {
		tokens[i] = strconv.FormatUint(t, 10)
	}
	fmt.Fprintf(e.stdout, "revoked %s token %s; the name stays delayed for %s\n", name, strings.Join(tokens, ", "), time.Duration(resp.DelayNs))
	return nil
}

// operatorFail prints why an operator's call failed and returns its exit
// code: ExitNotHeld for a name not held (with that token), ExitUnavailable
// when no leader answered, else ExitError.
func operatorFail(e *env, what string, err error, creds credentials.TransportCredentials) error {
	fmt.Fprintf(e.stderr, "leaseside: %s: %s\n", what, grantorError(err, creds))
	switch st := status.Convert(err); st.Code() {
	case codes.NotFound, codes.FailedPrecondition:
		return exitCode(ExitNotHeld)
	case codes.Unavailable, codes.DeadlineExceeded:
		return exitCode(ExitUnavailable)
	}
	return exitCode(ExitError)
}

// errNoLeaderAnswered is onLeader's error when it ran out of grantors or
// time; it is UNAVAILABLE.
func errNoLeaderAnswered(last error, creds credentials.TransportCredentials) error {
	msg := "no leader answered"
	if last != nil {
		msg += ": " + grantorError(last, creds)
	}
	return status.Error(codes.Unavailable, msg)
}

// onLeader makes call on the grantor leader, found from addrs by
// following NotLeader redirects. An answer that is not a redirect or a
// failure to reach a grantor is returned as it is.
func onLeader(ctx context.Context, creds credentials.TransportCredentials, addrs []string, call func(context.Context, grantorpb.GrantorClient) error) error {
	var last error
	for attempts := 0; len(addrs) > 0 && ctx.Err() == nil && attempts < 3*len(addrs)+5; attempts++ {
		a := addrs[0]
		addrs = addrs[1:]
		err := callGrantor(ctx, creds, a, call)
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK:
			return nil
		case codes.Unavailable, codes.DeadlineExceeded:
		case codes.FailedPrecondition:
			var hint string
			redirect := false
			for _, d := range st.Details() {
				if nl, ok := d.(*grantorpb.NotLeader); ok {
					hint, redirect = nl.LeaderRpcAddr, true
				}
			}
			if !redirect {
				return err // the leader answered
			}
			if hint != "" && hint != a {
				addrs = append([]string{hint}, addrs...)
			} else {
				addrs = append(addrs, a) // an election: ask again shortly
				select {
				case <-time.After(200 * time.Millisecond):
				case <-ctx.Done():
				}
			}
		default:
			return err
		}
		last = fmt.Errorf("%s: %w", a, err)
	}
	return errNoLeaderAnswered(last, creds)
}
