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
