package cli

import (
	"strings"
	"testing"
)

// dev's examples keep their files under the caller's own runtime or
// state directory, never in /tmp, where another user could have made the
// directory first (issue 21).
func TestDevExamplesKeepFilesOutOfTmp(t *testing.T) {
	ex := newDevCmd(&env{}).Example
	if !strings.Contains(ex, "--data-dir") || strings.Contains(ex, "/tmp") {
		t.Fatalf("dev's examples:\n%s\nwant a --data-dir example, and none in /tmp", ex)
	}
}
