package netlab

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Resource faults: a process of a host starved of CPU or of disk writes,
// through a control group the lab makes for it (one per limited process,
// at the top of the hierarchy, named netlab-PID-N). cgroup v2 is used
// where its unified hierarchy has the controller (cpu.max, io.max), and
// the v1 hierarchy of the controller otherwise (cpu.cfs_quota_us,
// blkio.throttle.*), as on hosts that keep v1 for cpu and blkio. Unlimit
// and Cleanup move the process back to the group it came from and remove
// the lab's group.

// ErrNoLimit is returned (wrapped, with the reason) when this machine
// offers no way to make a resource limit: no such controller in any
// cgroup hierarchy, or a file on no block device for a disk limit.
var ErrNoLimit = errors.New("netlab: resource limit not available here")

// cpuPeriod is the scheduling period of CPU limits.
const cpuPeriod = 100 * time.Millisecond

// limit is a cgroup the lab made for one process, in one hierarchy.
type limit struct {
	pid  int
	dir  string // the lab's group
	back string // the group the process came from, to move it back to
}

// hierarchy is a mounted cgroup hierarchy that has a controller.
type hierarchy struct {
	root       string // mount point
	v2         bool
	controller string // its name in /proc/PID/cgroup (v1)
}

// findHierarchy finds the cgroup hierarchy that has the controller (v2
// name: "cpu", "io"; its v1 name is given as v1).
func findHierarchy(v2name, v1name string) (hierarchy, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return hierarchy{}, err
	}
	defer f.Close()
	var v1 *hierarchy
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 31 23 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, s := range fields {
			if s == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || len(fields) < 5 {
			continue
		}
		mount, fstype, opts := fields[4], fields[sep+1], fields[sep+3]
		switch fstype {
		case "cgroup2":
			b, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers"))
			if err == nil && hasWord(string(b), v2name) {
				return hierarchy{root: mount, v2: true}, nil
			}
		case "cgroup":
			for _, o := range strings.Split(opts, ",") {
				if o == v1name && v1 == nil {
					v1 = &hierarchy{root: mount, controller: v1name}
				}
			}
		}
	}
	if v1 != nil {
		return *v1, nil
	}
	return hierarchy{}, fmt.Errorf("%w: no cgroup hierarchy has the %s controller", ErrNoLimit, v2name)
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// groupOf is the group of pid in hierarchy h, as a directory.
func (h hierarchy) groupOf(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// v2: "0::/path"; v1: "4:cpu,cpuacct:/path"
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if h.v2 && parts[0] == "0" && parts[1] == "" {
			return filepath.Join(h.root, parts[2]), nil
		}
		if !h.v2 && parts[0] != "0" && slices.Contains(strings.Split(parts[1], ","), h.controller) {
			return filepath.Join(h.root, parts[2]), nil
		}
	}
	return h.root, nil
}

// setting is a file of a group and what to write to it.
type setting struct{ file, value string }

// newLimit moves pid into a new group of the lab in hierarchy h, after
// writing the settings there in order.
func (l *Lab) newLimit(h hierarchy, controller string, pid int, settings ...setting) error {
	back, err := h.groupOf(pid)
	if err != nil {
		return fmt.Errorf("netlab: group of pid %d: %w", pid, err)
	}
	if h.v2 {
		// The lab's groups sit right under the root, which may have
		// processes and still hand controllers down.
		if err := os.WriteFile(filepath.Join(h.root, "cgroup.subtree_control"), []byte("+"+controller), 0); err != nil {
			return fmt.Errorf("%w: enabling %s for child groups: %v", ErrNoLimit, controller, err)
		}
	}
	l.mu.Lock()
	l.limitSeq++
	dir := filepath.Join(h.root, fmt.Sprintf("netlab-%d-%d", os.Getpid(), l.limitSeq))
	l.mu.Unlock()
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("netlab: %w", err)
	}
	lim := &limit{pid: pid, dir: dir, back: back}
	for _, s := range settings {
		if err := os.WriteFile(filepath.Join(dir, s.file), []byte(s.value), 0); err != nil {
			os.Remove(dir)
			return fmt.Errorf("netlab: writing %q to %s: %w", s.value, filepath.Join(dir, s.file), err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		os.Remove(dir)
		return fmt.Errorf("netlab: moving pid %d to %s: %w", pid, dir, err)
	}
	l.mu.Lock()
	l.limits = append(l.limits, lim)
	l.mu.Unlock()
	return nil
}

// LimitCPU lets process pid (a program started on a host, with all its
// threads and later children) use at most share of one CPU (0.05: 5 ms in
// every 100 ms), until Unlimit. It fails, wrapping ErrNoLimit, where no
// cgroup hierarchy has the cpu controller.
func (l *Lab) LimitCPU(pid int, share float64) error {
	if share <= 0 || share > 64 {
		return fmt.Errorf("netlab: LimitCPU share %v out of range", share)
	}
	h, err := findHierarchy("cpu", "cpu")
	if err != nil {
		return err
	}
	period := cpuPeriod.Microseconds()
	quota := max(int64(float64(period)*share), 1000) // the kernel's minimum is 1 ms
	if h.v2 {
		return l.newLimit(h, "cpu", pid, setting{"cpu.max", fmt.Sprintf("%d %d", quota, period)})
	}
	// Period first: the quota is checked against it.
	return l.newLimit(h, "cpu", pid,
		setting{"cpu.cfs_period_us", strconv.FormatInt(period, 10)},
		setting{"cpu.cfs_quota_us", strconv.FormatInt(quota, 10)})
}

// LimitDiskWrites lets process pid issue at most iops write operations a
// second to the block device that holds path (a data directory), until
// Unlimit: a slow disk, for fsync above all. It fails, wrapping
// ErrNoLimit and saying why, where the file is on no block device (tmpfs,
// overlay) or no hierarchy has the io (v1: blkio) controller.
func (l *Lab) LimitDiskWrites(pid int, path string, iops int) error {
	if iops < 1 {
		return fmt.Errorf("netlab: LimitDiskWrites iops %d out of range", iops)
	}
	dev, err := blockDevice(path)
	if err != nil {
		return err
	}
	h, err := findHierarchy("io", "blkio")
	if err != nil {
		return err
	}
	if h.v2 {
		return l.newLimit(h, "io", pid, setting{"io.max", fmt.Sprintf("%s wiops=%d", dev, iops)})
	}
	return l.newLimit(h, "blkio", pid, setting{"blkio.throttle.write_iops_device", fmt.Sprintf("%s %d", dev, iops)})
}

// blockDevice is "MAJOR:MINOR" of the whole disk that holds path.
func blockDevice(path string) (string, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return "", fmt.Errorf("netlab: %w", err)
	}
	dev := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	sys := "/sys/dev/block/" + dev
	if _, err := os.Stat(sys); err != nil {
		return "", fmt.Errorf("%w: %s is on device %s, which is not a block device (a tmpfs, overlay or network file system)", ErrNoLimit, path, dev)
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		// Throttling applies to whole disks.
		b, err := os.ReadFile(filepath.Join(sys, "..", "dev"))
		if err != nil {
			return "", fmt.Errorf("%w: disk of partition %s: %v", ErrNoLimit, dev, err)
		}
		dev = strings.TrimSpace(string(b))
	}
	return dev, nil
}

// Unlimit lifts every limit on pid: it goes back to the groups it came
// from, and the lab's groups are removed. A pid that has exited meanwhile
// is fine.
func (l *Lab) Unlimit(pid int) error {
	l.mu.Lock()
	var mine, rest []*limit
	for _, lim := range l.limits {
		if lim.pid == pid {
			mine = append(mine, lim)
		} else {
			rest = append(rest, lim)
		}
	}
	l.limits = rest
	l.mu.Unlock()
	var errs []error
	for _, lim := range mine {
		errs = append(errs, lim.remove())
	}
	return errors.Join(errs...)
}

// remove moves the process back and removes the group. A group whose
// process just exited may stay busy a moment; it is retried briefly.
func (lim *limit) remove() error {
	err := os.WriteFile(filepath.Join(lim.back, "cgroup.procs"), []byte(strconv.Itoa(lim.pid)), 0)
	if err != nil && !errors.Is(err, unix.ESRCH) {
		// Gone already, or its old group is gone: try the root.
		root := filepath.Dir(lim.dir)
		os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(lim.pid)), 0)
	}
	deadline := time.Now().Add(reapTimeout)
	for {
		err := os.Remove(lim.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("netlab: removing %s: %w", lim.dir, err)
		}
		time.Sleep(10 * time.Millisecond) // the kernel gives no event for an emptied v1 group
	}
}

// removeLimits removes every group the lab made (Cleanup).
func (l *Lab) removeLimits() error {
	l.mu.Lock()
	lims := l.limits
	l.limits = nil
	l.mu.Unlock()
	var errs []error
	for _, lim := range lims {
		errs = append(errs, lim.remove())
	}
	return errors.Join(errs...)
}
