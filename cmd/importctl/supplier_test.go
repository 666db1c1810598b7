package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// require-documents is off by default, set at creation with a flag, and
// turned on or off later with set-option.
func TestSupplierSetOption_RequireDocuments(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	c.ok("supplier", "create", "PLAIN")
	c.ok("supplier", "create", "STRICT", "--require-documents")
	required := func() map[string]any {
		t.Helper()
		m := map[string]any{}
		for _, s := range c.jsonList("supplier", "list") {
			m[s["code"].(string)] = s["require_documents"]
		}
		return m
	}
	if diff := cmp.Diff(map[string]any{"PLAIN": false, "STRICT": true}, required()); diff != "" {
		t.Errorf("after create (-want +got):\n%s", diff)
	}
	c.ok("supplier", "set-option", "PLAIN", "require-documents", "on")
	c.ok("supplier", "set-option", "STRICT", "require-documents", "off")
	if diff := cmp.Diff(map[string]any{"PLAIN": true, "STRICT": false}, required()); diff != "" {
		t.Errorf("after set-option (-want +got):\n%s", diff)
	}
	c.fails("not on or off", "supplier", "set-option", "PLAIN", "require-documents", "yes")
	c.fails("not one of require-documents", "supplier", "set-option", "PLAIN", "migration-emails", "on")
	c.fails("does not exist", "supplier", "set-option", "NOPE", "require-documents", "on")
	c.fails("accepts 3 arg(s)", "supplier", "set-option", "PLAIN", "require-documents")
	// Nothing changed by the refusals.
	if diff := cmp.Diff(map[string]any{"PLAIN": true, "STRICT": false}, required()); diff != "" {
		t.Errorf("after refusals (-want +got):\n%s", diff)
	}
}
