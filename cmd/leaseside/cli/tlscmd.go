package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/leaseside/leaseside/grantor/gossip"
	"github.com/leaseside/leaseside/grantor/pki"
)

func newTLSCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "make the cluster's CA, certificates and gossip key",
		Long: `Makes what a cluster's links need (SECURITY.md): one CA, a certificate per
grantor, sidecar and operator signed by it (ECDSA P-256, the role and name in
a URI SAN leaseside://ROLE/NAME), and a gossip key. Keys are written 0600.
Keep ca-key.pem where certificates are made, not on the nodes.`,
		Example: `  leaseside tls ca create --dir /etc/leaseside/tls
  leaseside tls cert create --dir /etc/leaseside/tls --grantor g1 --ip 192.0.2.10
  leaseside tls cert create --dir /etc/leaseside/tls --sidecar web-1
  leaseside tls gossip-key > /etc/leaseside/gossip.key`,
		Args: noArgs,
		RunE: helpOnly,
	}
	ca := &cobra.Command{
		Use:   "ca",
		Short: "the cluster's certificate authority",
		Long: `A cluster has one CA: every certificate of its grantors, sidecars and
operators is signed by it, and every node trusts only it (--tls-ca).`,
		Example: `  leaseside tls ca create --dir /etc/leaseside/tls`,
		Args:    noArgs,
		RunE:    helpOnly,
	}
	ca.AddCommand(newTLSCACreateCmd(e))
	cert := &cobra.Command{
		Use:   "cert",
		Short: "certificates of grantors, sidecars and operators",
		Long: `Each node presents a certificate naming its role and name: a grantor its
node ID, a sidecar the name its sessions are kept under, an operator who
runs members remove or bench.`,
		Example: `  leaseside tls cert create --dir /etc/leaseside/tls --grantor g1`,
		Args:    noArgs,
		RunE:    helpOnly,
	}
	cert.AddCommand(newTLSCertCreateCmd(e))
	cmd.AddCommand(ca, cert, newTLSGossipKeyCmd(e))
	return cmd
}

// helpOnly is the RunE of a command that only groups others: it shows
// the help and exits as a usage error.
func helpOnly(cmd *cobra.Command, _ []string) error {
	cmd.Help()
	return exitCode(ExitUsage)
}

func newTLSCACreateCmd(e *env) *cobra.Command {
	var dir string
	var days int
	cmd := &cobra.Command{
		Use:   "create",
		Short: "make a new cluster CA: DIR/ca.pem and DIR/ca-key.pem",
		Long: `Makes a new cluster CA in --dir: ca.pem (give it to every node) and
ca-key.pem (0600; keep it off the nodes). It refuses to overwrite a CA.`,
		Example: `  leaseside tls ca create --dir /etc/leaseside/tls`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if days <= 0 {
				return usagef("--days must be positive")
			}
			if err := pki.CreateCA(dir, time.Duration(days)*24*time.Hour); err != nil {
				return fail(e, err)
			}
			fmt.Fprintf(e.stdout, "wrote %s and %s\n", filepath.Join(dir, pki.CAFile), filepath.Join(dir, pki.CAKeyFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", ".", "directory to write the CA to (made 0700 if missing)")
	cmd.Flags().IntVar(&days, "days", int(pki.DefaultCAValidity/(24*time.Hour)), "days the CA is valid")
	return cmd
}

func newTLSCertCreateCmd(e *env) *cobra.Command {
	var dir, grantorID, sidecar, operator string
	var ips []net.IP
	var dns []string
	var days int
	var force bool
	var group string
	cmd := &cobra.Command{
		Use:   "create (--grantor NODE-ID | --sidecar NAME | --operator NAME)",
		Short: "make a certificate signed by the CA in --dir",
		Long: `Makes a key and a certificate for one identity, signed by the CA in --dir,
and writes DIR/ROLE-NAME.pem and DIR/ROLE-NAME-key.pem (0600). A grantor's
name is its node ID (--node-id); a sidecar's is the name its sessions are
kept under (the host, say); an operator's names the person or tool
(members remove, bench). --ip and --dns add SANs for other tools;
leaseside identifies peers by role and name alone. --force replaces an
existing certificate (renewal): the files are swapped atomically, then
reload the node (SIGHUP).`,
		Example: `  leaseside tls cert create --dir /etc/leaseside/tls --grantor g1 --ip 192.0.2.10
  leaseside tls cert create --dir /etc/leaseside/tls --sidecar web-1 --days 90
  leaseside tls cert create --dir /etc/leaseside/tls --operator alice`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var ids []pki.Identity
			for _, c := range []struct{ role, name string }{
				{pki.RoleGrantor, grantorID}, {pki.RoleSidecar, sidecar}, {pki.RoleOperator, operator},
			} {
				if c.name != "" {
					ids = append(ids, pki.Identity{Role: c.role, Name: c.name})
				}
			}
			if len(ids) != 1 {
				return usagef("give exactly one of --grantor, --sidecar and --operator")
			}
			if days <= 0 {
				return usagef("--days must be positive")
			}
			if err := ids[0].Validate(); err != nil {
				return usageError{err}
			}
			gid := -1
			if group != "" {
				g, err := lookupGroup(group)
				if err != nil {
					return usagef("--group %s: no such group on this host (the packages create leaseside-grantor; "+
						"groupadd it, or leave --group out and give the key to the group where it is installed): %v", group, err)
				}
				gid = g
			}
			cert, key, err := pki.CreateCert(dir, pki.CertRequest{
				Identity: ids[0], IPs: ips, DNSNames: dns, Validity: time.Duration(days) * 24 * time.Hour, Overwrite: force,
			})
			if err != nil {
				return fail(e, err)
			}
			if gid >= 0 {
				if err := shareWithGroup(key, gid); err != nil {
					return fail(e, fmt.Errorf("group %s: %w", group, err))
				}
			}
			fmt.Fprintf(e.stdout, "wrote %s and %s for %s\n", cert, key, ids[0].URI())
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&dir, "dir", ".", "directory of the CA (ca.pem, ca-key.pem); the certificate is written there")
	fs.StringVar(&grantorID, "grantor", "", "a grantor's certificate, for node ID NODE-ID")
	fs.StringVar(&sidecar, "sidecar", "", "a sidecar's certificate, named NAME")
	fs.StringVar(&operator, "operator", "", "an operator's certificate, named NAME")
	fs.IPSliceVar(&ips, "ip", nil, "IP SANs, comma-separated")
	fs.StringSliceVar(&dns, "dns", nil, "DNS SANs, comma-separated")
	fs.IntVar(&days, "days", int(pki.DefaultCertValidity/(24*time.Hour)), "days the certificate is valid (at most the CA's remaining life)")
	fs.BoolVar(&force, "force", false, "replace an existing certificate and key of the same identity")
	fs.StringVar(&group, "group", "", "give the key to this group, mode 0640 (leaseside-grantor: the packaged grantor unit runs as a dynamic user in that group)")
	return cmd
}

// shareWithGroup makes path readable by the group gid: mode 0640.
func shareWithGroup(path string, gid int) error {
	if err := os.Chown(path, -1, gid); err != nil {
		return err
	}
	return os.Chmod(path, 0o640)
}

func newTLSGossipKeyCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "gossip-key",
		Short: "print a new random gossip key (a line of a --gossip-key-file)",
		Long: `Prints a new random 32-byte gossip key, base64-encoded. A gossip key file
holds one key per line; the first encrypts, every one decrypts, so a key is
rotated in three reloads (packaging/README.md). Keep the file 0600.`,
		Example: `  leaseside tls gossip-key > /etc/leaseside/gossip.key && chmod 600 /etc/leaseside/gossip.key
  leaseside tls gossip-key >> /etc/leaseside/gossip.key   # a second key, for a rotation`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := gossip.NewKey()
			if err != nil {
				return fail(e, err)
			}
			fmt.Fprintln(e.stdout, k)
			return nil
		},
	}
}
