package fence

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// The record file: the highest token seen per lease, kept on disk so that
// no restart, crash or power loss lets an older token through again.
//
// It is an append-only log of text lines, after a header line:
//
//	leaseside-fence 1
//	<token> <lease> <crc32c of "<token> <lease>", 8 hex digits>
//
// Raising a lease's token appends one line and fsyncs it before the caller
// goes on to the write it fences, so a line is either whole on disk or its
// write never happened: a torn last line (a crash during its append) is
// dropped on the next open, a bad line before the last is corruption and
// refused. A lease's highest token is the largest on its lines. When the
// log has grown to many times the leases it names it is compacted: a new
// file with one line per lease, locked before it is renamed over the old.

const (
	recordHeader = "leaseside-fence 1\n"
	// maxRecordBytes bounds what Open reads: a record this large is not
	// one this package wrote (compaction keeps it near one line per lease).
	maxRecordBytes = 64 << 20
	// compactAfter is how many lines beyond one per lease the log may
	// hold before it is compacted.
	compactAfter = 4096
	// MaxLeaseBytes is the longest lease name a record keeps.
	MaxLeaseBytes = 256
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Errors of the record file.
var (
	// ErrRecordInUse: another process holds the record (OpenRecord with
	// wait false).
	ErrRecordInUse = errors.New("fence: the record file is in use by another process")
	// ErrBadRecord: the file is not a leaseside fence record, or is
	// corrupt before its last line.
	ErrBadRecord = errors.New("fence: not a valid fence record")
	// ErrBadLease: a lease name a record cannot keep.
	ErrBadLease = errors.New("fence: invalid lease name")
	// ErrBadToken: token 0, which no grant carries.
	ErrBadToken = errors.New("fence: invalid token")
)

// Record is an open record file, locked (flock, exclusive) for as long as
// it is open: the highest token seen per lease. Safe for concurrent use.
type Record struct {
	mu      sync.Mutex
	path    string
	f       *os.File
	size    int64 // bytes of whole lines, where the next line goes
	lines   int
	highest map[string]uint64
	// created: the file was made by this open, and its directory entry
	// is not yet known durable.
	created bool
	// slack is how many lines beyond one per lease the log may hold
	// before it is compacted (compactAfter; tests make it small).
	slack int
}

// OpenRecord opens (creating it if missing) and locks the record file at
// path, without following a symbolic link there. With wait it blocks until
// another holder of the lock lets go; without, it returns ErrRecordInUse.
func OpenRecord(path string, wait bool) (*Record, error) {
	for {
		r, again, err := openRecordOnce(path, wait)
		if !again {
			return r, err
		}
	}
}

// openRecordOnce opens and locks path; again says that the file was
// replaced (compacted) while this open waited for the lock, so the lock
// is on a file nobody uses any more: open the new one.
func openRecordOnce(path string, wait bool) (r *Record, again bool, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o666)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, false, fmt.Errorf("fence: record %s is a symbolic link: refusing to follow it", path)
		}
		return nil, false, fmt.Errorf("fence: record: %w", err)
	}
	r, again, err = lockOpened(f, path, wait)
	if r == nil {
		f.Close()
	}
	return r, again, err
}

// lockOpened locks f, opened at path, and loads it; again (and no Record)
// if path is another file by the time the lock is held.
func lockOpened(f *os.File, path string, wait bool) (*Record, bool, error) {
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	if err := flockRetry(f, how); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, false, fmt.Errorf("%w: %s", ErrRecordInUse, path)
		}
		return nil, false, fmt.Errorf("fence: lock record %s: %w", path, err)
	}
	var held, now unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &held); err != nil {
		return nil, false, fmt.Errorf("fence: record %s: %w", path, err)
	}
	if err := unix.Lstat(path, &now); err != nil || now.Ino != held.Ino || now.Dev != held.Dev {
		return nil, true, nil
	}
	if held.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false, fmt.Errorf("fence: record %s is not a regular file", path)
	}
	r := &Record{path: path, f: f, highest: map[string]uint64{}, created: held.Size == 0, slack: compactAfter}
	if err := r.load(held.Size); err != nil {
		return nil, false, err
	}
	return r, false, nil
}

// flockRetry is flock, retried when a signal interrupts the wait.
func flockRetry(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

// load reads the log and keeps the highest token per lease.
func (r *Record) load(size int64) error {
	if size > maxRecordBytes {
		return fmt.Errorf("%w: %s is %d bytes, over the %d a record grows to", ErrBadRecord, r.path, size, maxRecordBytes)
	}
	b, err := io.ReadAll(io.NewSectionReader(r.f, 0, size))
	if err != nil {
		return fmt.Errorf("fence: read record %s: %w", r.path, err)
	}
	if len(b) == 0 {
		return nil
	}
	if !bytes.HasPrefix(b, []byte(recordHeader)) {
		if len(b) < len(recordHeader) && bytes.HasPrefix([]byte(recordHeader), b) {
			return nil // a torn header: nothing was ever recorded
		}
		return fmt.Errorf("%w: %s does not start with %q", ErrBadRecord, r.path, strings.TrimSpace(recordHeader))
	}
	r.size = int64(len(recordHeader))
	rest := b[len(recordHeader):]
	for n := 2; len(rest) > 0; n++ {
		line, tail, whole := bytes.Cut(rest, []byte("\n"))
		lease, token, err := parseRecordLine(string(line))
		if !whole || err != nil {
			if !whole || len(tail) == 0 {
				return nil // the last line, torn by a crash during its append: its write never happened
			}
			return fmt.Errorf("%w: %s line %d: %v", ErrBadRecord, r.path, n, err)
		}
		if token > r.highest[lease] {
			r.highest[lease] = token
		}
		r.size += int64(len(line)) + 1
		r.lines++
		rest = tail
	}
	return nil
}

// recordLine is one line of the log, with its newline.
func recordLine(lease string, token uint64) string {
	body := strconv.FormatUint(token, 10) + " " + lease
	return fmt.Sprintf("%s %08x\n", body, crc32.Checksum([]byte(body), crcTable))
}

func parseRecordLine(line string) (string, uint64, error) {
	i := strings.LastIndexByte(line, ' ')
	if i < 0 {
		return "", 0, errors.New("no checksum")
	}
	body, sum := line[:i], line[i+1:]
	if want := fmt.Sprintf("%08x", crc32.Checksum([]byte(body), crcTable)); sum != want {
		return "", 0, fmt.Errorf("checksum %q, want %s", sum, want)
	}
	tok, lease, ok := strings.Cut(body, " ")
	if !ok {
		return "", 0, errors.New("no lease")
	}
	token, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || token == 0 {
		return "", 0, fmt.Errorf("token %q", tok)
	}
	if err := CheckLease(lease); err != nil {
		return "", 0, err
	}
	return lease, token, nil
}

// CheckLease returns an error wrapping ErrBadLease unless lease is 1 to
// MaxLeaseBytes bytes of printable ASCII without spaces (every leaseside
// lease name is).
func CheckLease(lease string) error {
	if len(lease) == 0 || len(lease) > MaxLeaseBytes {
		return fmt.Errorf("%w: must be 1 to %d bytes, got %d", ErrBadLease, MaxLeaseBytes, len(lease))
	}
	for i := 0; i < len(lease); i++ {
		if c := lease[i]; c <= ' ' || c > '~' {
			return fmt.Errorf("%w: byte 0x%02x at %d (printable ASCII without spaces only)", ErrBadLease, c, i)
		}
	}
	return nil
}

// Highest returns the highest token recorded for lease (0 if none).
func (r *Record) Highest(lease string) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.highest[lease]
}

// Leases returns how many leases the record keeps a token of.
func (r *Record) Leases() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.highest)
}

// Admit refuses a token below the highest recorded for lease with a
// *StaleTokenError; otherwise it records token (durably, before it
// returns, if it is a new highest) and returns nil.
func (r *Record) Admit(lease string, token uint64) error {
	if err := CheckLease(lease); err != nil {
		return err
	}
	if token == 0 {
		return fmt.Errorf("%w: 0 (tokens start at 1)", ErrBadToken)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return fmt.Errorf("fence: record %s is closed", r.path)
	}
	h := r.highest[lease]
	switch {
	case token < h:
		return &StaleTokenError{Lease: lease, Token: token, Highest: h}
	case token == h:
		return nil
	}
	if err := r.appendLocked(recordLine(lease, token)); err != nil {
		return err
	}
	r.highest[lease] = token
	r.lines++
	if r.lines > len(r.highest)+r.slack {
		return r.compactLocked()
	}
	return nil
}

// appendLocked writes line after the last whole line (over a torn one, if
// any) and makes it durable.
func (r *Record) appendLocked(line string) error {
	if r.size == 0 {
		line = recordHeader + line
	}
	if _, err := r.f.WriteAt([]byte(line), r.size); err != nil {
		return fmt.Errorf("fence: append to record %s: %w", r.path, err)
	}
	if err := r.f.Truncate(r.size + int64(len(line))); err != nil {
		return fmt.Errorf("fence: record %s: %w", r.path, err)
	}
	if err := r.f.Sync(); err != nil {
		return fmt.Errorf("fence: sync record %s: %w", r.path, err)
	}
	r.size += int64(len(line))
	if r.created {
		if err := syncDir(filepath.Dir(r.path)); err != nil {
			return err
		}
		r.created = false
	}
	return nil
}

// compactLocked replaces the log with one line per lease: a new file,
// written, synced and locked before it is renamed over the old one, so the
// lock never lapses; an opener that was waiting on the old file sees it
// replaced and opens the new one.
func (r *Record) compactLocked() error {
	var b strings.Builder
	b.WriteString(recordHeader)
	for _, lease := range slices.Sorted(maps.Keys(r.highest)) {
		b.WriteString(recordLine(lease, r.highest[lease]))
	}
	f, err := createTemp(r.path + ".tmp")
	if err != nil {
		return fmt.Errorf("fence: compact record %s: %w", r.path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if fi, err := r.f.Stat(); err == nil {
		f.Chmod(fi.Mode().Perm())
	}
	if _, err := f.WriteString(b.String()); err != nil {
		return fmt.Errorf("fence: compact record %s: %w", r.path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fence: compact record %s: %w", r.path, err)
	}
	if err := flockRetry(f, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return fmt.Errorf("fence: lock compacted record %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, r.path); err != nil {
		return fmt.Errorf("fence: compact record %s: %w", r.path, err)
	}
	ok = true
	r.f.Close()
	r.f, r.size, r.lines = f, int64(b.Len()), len(r.highest)
	return syncDir(filepath.Dir(r.path))
}

// Close lets go of the lock and the file.
func (r *Record) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// syncDir makes the entries of dir (a created or renamed file) durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fence: sync directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fence: sync directory %s: %w", dir, err)
	}
	return nil
}
