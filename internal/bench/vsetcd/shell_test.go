package main

import (
	"context"
	"strings"
	"testing"
)

func TestTimeCycles(t *testing.T) {
	res, err := timeCycles(context.Background(), [][]string{{"true"}, {"sh", "-c", "exit 0"}}, 1, 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"time per cycle mean", "time per cycle p50", "time per cycle p99"} {
		if f, ok := res.Figure(name); !ok || !(f.Value > 0) {
			t.Errorf("figure %q = %+v, want > 0", name, f)
		}
	}
	if !strings.Contains(res.Setup, "4 cycles") || !strings.Contains(res.Setup, "`true` then `sh -c exit 0`") {
		t.Errorf("setup %q does not say what ran", res.Setup)
	}
}

// A command that fails fails the run, naming it and its stderr.
func TestTimeCyclesFailure(t *testing.T) {
	_, err := timeCycles(context.Background(), [][]string{{"true"}, {"sh", "-c", "echo refused >&2; exit 3"}}, 0, 4)
	if err == nil || !strings.Contains(err.Error(), "refused") || !strings.Contains(err.Error(), "cycle 0") {
		t.Errorf("timeCycles = %v, want the failing command's error with its stderr", err)
	}
}

func TestCmdList(t *testing.T) {
	var c cmdList
	if err := c.Set("leaseside acquire --detached x"); err != nil || len(c) != 1 || len(c[0]) != 4 {
		t.Errorf("Set: %v, %v", c, err)
	}
	if err := c.Set("   "); err == nil {
		t.Errorf("an empty command was taken")
	}
}
