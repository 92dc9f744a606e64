package ipc

import (
	"fmt"
	"strings"
)

// MaxNameBytes is the longest lease name.
const MaxNameBytes = 256

// ValidateName checks a lease name: 1 to MaxNameBytes bytes of ASCII
// letters, digits and "._-/", with no empty or ".." segment between
// slashes. It returns an *Error with CodeInvalidName.
func ValidateName(name string) error {
	if e := validateName(name); e != nil {
		return e
	}
	return nil
}

func validateName(name string) *Error {
	if len(name) == 0 || len(name) > MaxNameBytes {
		return Errorf(CodeInvalidName, "lease name must be 1 to %d bytes, got %d", MaxNameBytes, len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._-/", c) >= 0) {
			return Errorf(CodeInvalidName, "lease name has %s at byte %d; allowed are ASCII letters, digits and ._-/", quoteByte(c), i)
		}
	}
	for _, seg := range strings.Split(name, "/") {
		switch seg {
		case "":
			return Errorf(CodeInvalidName, "lease name %q has an empty segment", name)
		case "..":
			return Errorf(CodeInvalidName, "lease name %q has a \"..\" segment", name)
		}
	}
	return nil
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
