package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leaseside/leaseside/ipc"
)

// envFileMode is the mode of the file `acquire --env-file` writes: the
// token is for the service it gates (systemd reads EnvironmentFile= as
// root), nobody else.
const envFileMode = 0o600

// grantEnv is what a command under a lease gets in its environment (run,
// elect), and what `acquire --env-file` writes, in that order.
func grantEnv(name string, g *ipc.Grant, socket string) [][2]string {
	return [][2]string{
		{EnvLease, name},
		{EnvToken, g.Token},
		{EnvDeadline, strconv.FormatInt(g.DeadlineBoottimeNs, 10)},
		{EnvSocket, socket},
	}
}

// writeEnvFile writes vars as KEY=VALUE lines to path, in the syntax
// systemd's EnvironmentFile= and a POSIX shell's "." both read, and
// replaces path atomically: a temporary file in the same directory,
// created O_EXCL|O_NOFOLLOW with mode 0600, written, synced and renamed
// over path. No symlink is followed: not at path (the rename replaces a
// symlink there, never writes through it), nor at its directory's last
// component. A reader sees the old file or the new one, never a part.
func writeEnvFile(path string, vars [][2]string) error {
	// Dir, not Split: a trailing slash would make O_NOFOLLOW follow.
	dir, base := filepath.Dir(path), filepath.Base(path)
	if strings.HasSuffix(path, "/") || base == "." || base == ".." {
		return fmt.Errorf("--env-file %s: not a file name", path)
	}
	var b strings.Builder
	b.WriteString("# written by leaseside acquire; read with systemd EnvironmentFile= or sh's \".\"\n")
	for _, kv := range vars {
		v, err := envQuote(kv[1])
		if err != nil {
			return fmt.Errorf("--env-file %s: %s: %w", path, kv[0], err)
		}
		fmt.Fprintf(&b, "%s=%s\n", kv[0], v)
	}
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
			return fmt.Errorf("--env-file %s: directory %s is a symlink or not a directory; give a real directory", path, dir)
		}
		return fmt.Errorf("--env-file %s: directory %s: %w", path, dir, err)
	}
	defer unix.Close(dfd)
	tmp := fmt.Sprintf(".%s.%d.tmp", base, os.Getpid())
	fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, envFileMode)
	if err != nil {
		return fmt.Errorf("--env-file %s: creating %s in %s: %w", path, tmp, dir, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(dir, tmp))
	err = f.Chmod(envFileMode) // the umask may have narrowed it; never widened
	if err == nil {
		_, err = f.WriteString(b.String())
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, base)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
		return fmt.Errorf("--env-file %s: %w", path, err)
	}
	unix.Fsync(dfd) // the rename itself, durable
	return nil
}

// envQuote returns v as an EnvironmentFile= value: bare when it is made
// of characters neither systemd nor sh treat specially, else in double
// quotes with \, ", $ and ` escaped. A newline or NUL is refused.
func envQuote(v string) (string, error) {
	if strings.ContainsAny(v, "\n\r\x00") {
		return "", errors.New("value has a newline or NUL")
	}
	bare := v != ""
	for _, c := range v {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-/+:@%,", c)) {
			bare = false
			break
		}
	}
	if bare {
		return v, nil
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, `$`, `\$`, "`", "\\`")
	return `"` + r.Replace(v) + `"`, nil
}
