package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/leaseside/leaseside/grantor/grantorpb"
	"github.com/leaseside/leaseside/ipc"
)

// membersCallTimeout bounds one call to one grantor.
const membersCallTimeout = 5 * time.Second

// membersOutput is what `members --json` prints: the shape of the socket's
// members reply (ipc/PROTOCOL.md).
type membersOutput struct {
	LeaderID string       `json:"leader_id"`
	Members  []ipc.Member `json:"members"`
}

func newMembersCmd(e *env) *cobra.Command {
	var cf clientFlags
	var grantors string
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "members",
		Short: "list the cluster's grantors and sidecars; remove a dead grantor",
		Long: `Lists the grantors (raft configuration, voter flag, raft state, and the
leader's last contact with each) and every gossip member, sidecars included.
With --grantors it asks those grantors (any of them answers; the leader is
asked for last contact); without it, the local sidecar relays the question.

'members remove' takes a dead grantor out of the raft configuration.`,
		Example: `  leaseside members
  leaseside members --grantors 192.0.2.10:7401 --json
  leaseside members remove g3 --grantors 192.0.2.10:7401`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			creds, err := tf.credentials()
			if err != nil {
				return fail(e, err)
			}
			return runMembers(cmd.Context(), e, &cf, grantors, creds)
		},
	}
	cf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&grantors, "grantors", "", "comma-separated gRPC addresses of grantors to ask (default: the local sidecar)")
	tf.register(cmd.Flags(), false)
	cmd.AddCommand(newMembersRemoveCmd(e))
	return cmd
}

// runMembers lists the cluster's grantors and sidecars.
func runMembers(ctx context.Context, e *env, cf *clientFlags, grantors string, creds credentials.TransportCredentials) error {
	ctx, cancel := context.WithTimeout(ctx, cf.timeout)
	defer cancel()
	var out membersOutput
	if addrs := splitList(grantors); len(addrs) > 0 {
		resp, err := askMembers(ctx, creds, addrs)
		if err != nil {
			fmt.Fprintf(e.stderr, "leaseside: members: %v\n", err)
			return exitCode(ExitUnavailable)
		}
		out = membersFromPB(resp)
	} else {
		c := cf.client()
		defer c.Close()
		ms, leader, err := c.Members(ctx)
		if err != nil {
			return cf.fail(e, err, asked{})
		}
		out = membersOutput{LeaderID: leader, Members: ms}
	}
	if out.Members == nil {
		out.Members = []ipc.Member{}
	}
	if cf.json {
		printJSON(e.stdout, out)
		return nil
	}
	printMembers(e.stdout, out)
	return nil
}

// askMembers asks the grantors in turn until one answers; if that one is
// not the leader and the leader's address is known, it asks the leader
// too, which alone knows its followers' last contact.
func askMembers(ctx context.Context, creds credentials.TransportCredentials, addrs []string) (*grantorpb.MembersResponse, error) {
	var resp *grantorpb.MembersResponse
	var errs []error
	for _, a := range addrs {
		r, err := callMembers(ctx, creds, a)
		if err == nil {
			resp = r
			break
		}
		errs = append(errs, fmt.Errorf("%s: %s", a, grantorError(err, creds)))
	}
	if resp == nil {
		return nil, fmt.Errorf("no grantor answered: %w", errors.Join(errs...))
	}
	if resp.LeaderId == "" || resp.LeaderId == resp.AnsweredBy {
		return resp, nil
	}
	for _, m := range resp.Members {
		if m.NodeId == resp.LeaderId && m.RpcAddr != "" {
			if r, err := callMembers(ctx, creds, m.RpcAddr); err == nil && r.AnsweredBy == resp.LeaderId {
				return r, nil
			}
		}
	}
	return resp, nil
}

func callMembers(ctx context.Context, creds credentials.TransportCredentials, addr string) (*grantorpb.MembersResponse, error) {
	var resp *grantorpb.MembersResponse
	err := callGrantor(ctx, creds, addr, func(ctx context.Context, c grantorpb.GrantorClient) (err error) {
		resp, err = c.Members(ctx, &grantorpb.MembersRequest{})
		return err
	})
	return resp, err
}

// callGrantor calls the grantor at addr over gRPC, with creds, within
// membersCallTimeout.
func callGrantor(ctx context.Context, creds credentials.TransportCredentials, addr string, call func(context.Context, grantorpb.GrantorClient) error) error {
	return callGrantorWithin(ctx, creds, addr, membersCallTimeout, call)
}

// callGrantorWithin calls the grantor at addr over gRPC, with creds,
// within timeout.
func callGrantorWithin(ctx context.Context, creds credentials.TransportCredentials, addr string, timeout time.Duration, call func(context.Context, grantorpb.GrantorClient) error) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return call(ctx, grantorpb.NewGrantorClient(conn))
}

// grantorError says in words why a call to a grantor failed, with what to
// do where the cause is a setting: gRPC's own texts name transports and
// prefaces.
func grantorError(err error, creds credentials.TransportCredentials) string {
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		return st.Message()
	}
	msg := st.Message()
	tlsOn := creds.Info().SecurityProtocol == "tls"
	switch {
	case strings.Contains(msg, "connection refused"):
		return "nothing listens there (connection refused)"
	case !tlsOn && (strings.Contains(msg, "server preface") || strings.Contains(msg, "connection reset")):
		return "the grantor closed the connection at once: it wants TLS, give --tls-ca, --tls-cert and --tls-key"
	case tlsOn && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the grantor speaks clear text, not TLS: leave out --tls-ca, --tls-cert and --tls-key"
	case tlsOn && strings.Contains(msg, "authentication handshake failed"):
		_, cause, _ := strings.Cut(msg, "authentication handshake failed: ")
		return "the TLS handshake with the grantor failed (" + cause + "): check that --tls-ca is the cluster's CA and --tls-cert is signed by it"
	}
	return msg
}

func membersFromPB(resp *grantorpb.MembersResponse) membersOutput {
	out := membersOutput{LeaderID: resp.LeaderId, Members: make([]ipc.Member, len(resp.Members))}
	for i, m := range resp.Members {
		out.Members[i] = ipc.Member{Name: m.Name, Role: m.Role, NodeID: m.NodeId, RPCAddr: m.RpcAddr, RaftAddr: m.RaftAddr,
			GossipAddr: m.GossipAddr, GossipState: m.GossipState, Voter: m.Voter, RaftState: m.RaftState,
			LastContactMs: m.LastContactMs, Version: m.Version}
	}
	return out
}

func printMembers(w io.Writer, out membersOutput) {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tROLE\tNODE-ID\tRPC\tRAFT\tGOSSIP\tSTATE\tVOTER\tRAFT-STATE\tLAST-CONTACT")
	for _, m := range out.Members {
		voter := "-"
		if m.Role == "grantor" {
			voter = strconv.FormatBool(m.Voter)
		}
		contact := "-"
		if m.LastContactMs >= 0 {
			contact = (time.Duration(m.LastContactMs) * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", dash(m.Name), dash(m.Role), dash(m.NodeID),
			dash(m.RPCAddr), dash(m.RaftAddr), dash(m.GossipAddr), dash(m.GossipState), voter, dash(m.RaftState), contact)
	}
	tw.Flush()
	if out.LeaderID == "" {
		fmt.Fprintln(w, "\nno leader known")
	} else {
		fmt.Fprintf(w, "\nleader: %s\n", out.LeaderID)
	}
}

func newMembersRemoveCmd(e *env) *cobra.Command {
	var grantors string
	var timeout time.Duration
	var tf tlsFlags
	cmd := &cobra.Command{
		Use:   "remove NODE-ID --grantors ADDR,...",
		Short: "take a dead grantor out of the raft configuration",
		Long: `Takes the grantor NODE-ID out of the raft configuration, through the leader
(found from --grantors; NotLeader redirects are followed). It is for a
grantor that is dead and will not come back: a running one leaves with
'leaseside grantor leave' (a stopped one stays a voter). The removal
sticks while gossip still lists the grantor alive (it does for seconds
after a kill): the leader adds it back only once gossip has seen it leave
or die and come back, or it restarts.`,
		Example: `  leaseside members remove g3 --grantors 192.0.2.10:7401,192.0.2.11:7401`,
		Args:    exactArgs("NODE-ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			addrs := splitList(grantors)
			if len(addrs) == 0 {
				return usagef("members remove needs --grantors (the local sidecar does not relay removals)")
			}
			creds, err := tf.credentials()
			if err != nil {
				return fail(e, err)
			}
			return runMembersRemove(cmd.Context(), e, creds, args[0], addrs, timeout)
		},
	}
	tf.register(cmd.Flags(), false)
	cmd.Flags().StringVar(&grantors, "grantors", "", "comma-separated gRPC addresses of grantors (any; the leader is found from them)")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// runMembersRemove removes a grantor from the raft configuration through
// the leader, following NotLeader redirects.
func runMembersRemove(ctx context.Context, e *env, creds credentials.TransportCredentials, id string, addrs []string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var lastErr error
	for attempts := 0; len(addrs) > 0 && ctx.Err() == nil && attempts < 3*len(addrs)+5; attempts++ {
		a := addrs[0]
		addrs = addrs[1:]
		err := callGrantor(ctx, creds, a, func(ctx context.Context, c grantorpb.GrantorClient) error {
			_, err := c.RemoveServer(ctx, &grantorpb.RemoveServerRequest{NodeId: id})
			return err
		})
		st := status.Convert(err)
		switch st.Code() {
		case codes.OK:
			fmt.Fprintf(e.stdout, "removed %s from the raft configuration\n", id)
			return nil
		case codes.NotFound, codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated:
			// The grantor answered, and no retry will change its answer.
			fmt.Fprintf(e.stderr, "leaseside: members remove: %s\n", st.Message())
			return exitCode(ExitError)
		case codes.FailedPrecondition:
			hint := ""
			for _, d := range st.Details() {
				if nl, ok := d.(*grantorpb.NotLeader); ok {
					hint = nl.LeaderRpcAddr
				}
			}
			if hint == "" && len(st.Details()) == 0 {
				fmt.Fprintf(e.stderr, "leaseside: members remove: %s\n", st.Message())
				return exitCode(ExitError)
			}
			if hint != "" && hint != a {
				addrs = append([]string{hint}, addrs...)
			}
		}
		lastErr = fmt.Errorf("%s: %s", a, grantorError(err, creds))
	}
	fmt.Fprintf(e.stderr, "leaseside: members remove: no leader answered: %v\n", lastErr)
	return exitCode(ExitUnavailable)
}
