package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --memory-limit's values: sizes with a binary suffix or none; anything
// else is refused with a message naming the flag and the forms.
func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want int64
		bad  bool
	}{
		{name: "bytes", in: "536870912", want: 512 << 20},
		{name: "MiB", in: "512MiB", want: 512 << 20},
		{name: "GiB", in: "2GiB", want: 2 << 30},
		{name: "KiB", in: "64KiB", want: 64 << 10},
		{name: "none", in: "none", want: 0},
		{name: "zero is not none", in: "0", bad: true},
		{name: "negative", in: "-1MiB", bad: true},
		{name: "decimal suffix", in: "512MB", bad: true},
		{name: "overflow", in: "9999999999GiB", bad: true},
		{name: "empty number", in: "MiB", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseMemoryLimit(tc.in)
			if tc.bad {
				if err == nil || !strings.Contains(err.Error(), "--memory-limit") || !strings.Contains(err.Error(), "512MiB") {
					t.Fatalf("parseMemoryLimit(%q) = %d, %v; want an error naming the flag and its forms", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseMemoryLimit(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

// A cgroup's memory limit file: a number is the limit; "max" (v2) and
// v1's near-MaxInt64 "unlimited" are none.
func TestReadCgroupLimit(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, content string
		want          int64
	}{
		{name: "v2 limit", content: "1073741824\n", want: 1 << 30},
		{name: "v2 max", content: "max\n", want: 0},
		{name: "v1 unlimited", content: "9223372036854771712\n", want: 0},
		{name: "garbage", content: "lots\n", want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := readCgroupLimit(p); got != tc.want {
				t.Fatalf("readCgroupLimit(%q) = %d, want %d", tc.content, got, tc.want)
			}
		})
	}
	if got := readCgroupLimit(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("a missing file: %d", got)
	}
}
