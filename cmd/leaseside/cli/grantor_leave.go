package cli

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
)

// leaveOutput is what `grantor leave --json` prints.
type leaveOutput struct {
	NodeID  string `json:"node_id"`
	Outcome string `json:"outcome"`
}

func newGrantorLeaveCmd(e *env) *cobra.Command {
	var configFile, rpcAddr string
	var timeout time.Duration
	var asJSON bool
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "leave",
		Short: "take a running grantor out of the cluster, then stop it",
		Long: `Asks a running grantor (at --rpc-addr, or the rpc_addr of --config, else
127.0.0.1:7401) to leave the cluster: it stops acknowledging renewals, hands
leadership over if it leads, has the leader remove it from the raft
configuration, leaves gossip, answers, and then its process exits 0 (a
systemd unit with Restart=on-failure stays stopped). Use it to shrink the
cluster or to retire a host; a plain stop (SIGTERM, systemctl stop or
restart, a package upgrade) keeps the grantor a voter. For a grantor that is
dead, use 'leaseside members remove'.

It prints what became of the grantor's place in the raft configuration:
"removed", "not in the configuration", or "kept: the last voter" (the only
voter does not remove itself: its raft state is the cluster's).

With TLS it calls as the certificate of --tls-cert (an operator's or a
grantor's), else as the grantor's own from the tls_* keys of --config.`,
		Example: `  leaseside grantor leave --config /etc/leaseside/grantor.json   # this host's grantor
  leaseside grantor leave --rpc-addr 192.0.2.12:7401 --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o := defaultGrantorOptions()
			if configFile != "" {
				if err := loadGrantorConfig(configFile, &o); err != nil {
					return fail(e, err)
				}
			}
			addr := rpcAddr
			if addr == "" {
				addr = dialable(o.RPCAddr)
			}
			tf.fromFile(cmd.Flags(), o.TLS.CA, o.TLS.Cert, o.TLS.Key)
			creds, err := tf.credentials()
			if err != nil {
				return fail(e, err)
			}
			return runGrantorLeave(cmd.Context(), e, creds, addr, timeout, asJSON)
		},
	}
	cmd.Flags().StringVar(&configFile, "config", "", "grantor.json to read rpc_addr from (the grantor's own config)")
	cmd.Flags().StringVar(&rpcAddr, "rpc-addr", "", "gRPC address of the grantor that is to leave (default: rpc_addr of --config, else "+defaultGrantorOptions().RPCAddr+")")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long (the grantor may wait for a leader to remove it)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON")
	tf.register(cmd.Flags(), false)
	return cmd
}

// dialable turns a listen address into one to dial: an unspecified host
// (0.0.0.0, ::, none) is this host's loopback.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// runGrantorLeave calls the Leave RPC of the grantor at addr.
func runGrantorLeave(ctx context.Context, e *env, creds credentials.TransportCredentials, addr string, timeout time.Duration, asJSON bool) error {
	var resp *grantorpb.LeaveResponse
	err := callGrantorWithin(ctx, creds, addr, timeout, func(ctx context.Context, c grantorpb.GrantorClient) (err error) {
		resp, err = c.Leave(ctx, &grantorpb.LeaveRequest{})
		return err
	})
	switch st := status.Convert(err); st.Code() {
	case codes.OK:
	case codes.Unavailable:
		fmt.Fprintf(e.stderr, "leaseside: grantor leave: no grantor answers at %s (is it running there? see --rpc-addr and --config)\n", addr)
		return exitCode(ExitUnavailable)
	case codes.DeadlineExceeded:
		fmt.Fprintf(e.stderr, "leaseside: grantor leave: the grantor at %s did not confirm its removal within %v; it stops all the same, "+
			"and the leader removes it once gossip lists it as left (see leaseside members)\n", addr, timeout)
		return exitCode(ExitUnavailable)
	default:
		fmt.Fprintf(e.stderr, "leaseside: grantor leave: %s: %s\n", addr, st.Message())
		return exitCode(ExitError)
	}
	out := leaveOutput{NodeID: resp.GetNodeId(), Outcome: resp.GetOutcome()}
	if asJSON {
		printJSON(e.stdout, out)
		return nil
	}
	fmt.Fprintf(e.stdout, "grantor %s left the cluster (raft configuration: %s) and is stopping\n", out.NodeID, out.Outcome)
	return nil
}
