package integration

import (
	"encoding/json"
	"fmt"
	"testing"
)

// jsonField returns a top-level field of a JSON object as text.
func jsonField(t *testing.T, doc, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("not JSON: %q: %v", doc, err)
	}
	v, ok := m[field]
	if !ok {
		t.Fatalf("no field %q in %s", field, doc)
	}
	return fmt.Sprint(v)
}

// deadlineOf returns deadline_boottime_ns of the named lease in a
// `status --json` document.
func deadlineOf(t *testing.T, doc, name string) int64 {
	t.Helper()
	var s struct {
		Leases []struct {
			Lease    string `json:"lease"`
			Deadline int64  `json:"deadline_boottime_ns"`
		} `json:"leases"`
	}
	if err := json.Unmarshal([]byte(doc), &s); err != nil {
		t.Fatalf("status JSON: %v: %s", err, doc)
	}
	for _, l := range s.Leases {
		if l.Lease == name {
			return l.Deadline
		}
	}
	t.Fatalf("%s not in status: %s", name, doc)
	return 0
}
