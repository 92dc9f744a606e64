package pki

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// TestValidNameIsThePattern: validName accepts exactly what the regular
// expression it replaced accepts, on edge cases and on random strings
// drawn from the allowed bytes and a few others.
func TestValidNameIsThePattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	cases := []string{
		"", "a", "Z", "0", ".", "_", "-", "a.", "a_b-c.d", ".a", "-a", "_a",
		"a b", "a/b", "a\n", "\na", "é", "aé", "a\x00",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129),
		"a" + strings.Repeat("-", 127), "a" + strings.Repeat("-", 128),
	}
	alphabet := "aZ09._-/ é\n"
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := r.IntN(12)
		if r.IntN(10) == 0 {
			n = 120 + r.IntN(16)
		}
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		if got, want := validName(s), pattern.MatchString(s); got != want {
			t.Fatalf("validName(%q) = %v, the pattern says %v", s, got, want)
		}
	}
}
