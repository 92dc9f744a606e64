package integration

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// `dev --rpc-addr` serves its grantor on TCP without TLS, where every
// caller is an operator: every local user, past the socket's mode and
// ACL. Without --insecure dev refuses to start (exit 2, naming the flag
// and --insecure), on loopback too.
func TestDevRPCAddrNeedsInsecure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "dev", "--socket", tempSocket(t), "--data-dir", t.TempDir(), "--rpc-addr", "127.0.0.1:0")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("dev --rpc-addr without --insecure: %v, want exit status 2\n%s", err, out)
	}
	for _, want := range []string{"--rpc-addr 127.0.0.1:0", "every local user", "--insecure"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}

// When dev's grantor stops on its own (here: left through the Leave RPC,
// as anyone who reaches an --insecure --rpc-addr may make it), dev stops
// too, exit 1, instead of serving a socket whose grantor is gone.
func TestDevStopsWithItsGrantor(t *testing.T) {
	t.Parallel()
	// Its grantor chooses the port (a free one picked here could be taken
	// by another process before dev binds it).
	p := startDev(t, tempSocket(t), t.TempDir(), "--rpc-addr", "127.0.0.1:0", "--insecure")
	leave := exec.Command(bin, "grantor", "leave", "--rpc-addr", p.grantorRPC)
	if out, err := leave.CombinedOutput(); err != nil {
		t.Fatalf("grantor leave: %v\n%s", err, out)
	}
	select {
	case err := <-p.exited:
		p.exited <- err
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("dev ended with %v after its grantor left, want exit status 1\n%s", err, p.log.String())
		}
	case <-time.After(timeout):
		t.Fatalf("dev still runs %v after its grantor left", timeout) // the cleanup prints its log
	}
	if !strings.Contains(p.log.String(), "the embedded grantor stopped") {
		t.Fatalf("dev's log does not say why it stopped:\n%s", p.log.String())
	}
}
