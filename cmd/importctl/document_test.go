package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// document put stores the file under the supplier's document root, where
// E6 and E8 look for it.
func TestDocumentPut(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	store := t.TempDir()
	c.env["DOCUMENTS_URL"] = "file://" + store
	c.ok("supplier", "create", "ACME", "--document-root", "imports/acme/")
	c.ok("supplier", "create", "BARE")
	src := filepath.Join(t.TempDir(), "st.pdf")
	if err := os.WriteFile(src, []byte("%PDF-1.4 statement"), 0o600); err != nil {
		t.Fatal(err)
	}

	var out map[string]any
	if err := json.Unmarshal([]byte(c.ok("document", "put", "ACME", "2024/03/st.pdf", src, "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if out["key"] != "imports/acme/2024/03/st.pdf" || out["bytes"] != float64(18) {
		t.Errorf("answer %v", out)
	}
	for _, p := range []string{"imports/acme/2024/03/st.pdf"} {
		if b, err := os.ReadFile(filepath.Join(store, p)); err != nil || string(b) != "%PDF-1.4 statement" {
			t.Errorf("%s: %q %v", p, b, err)
		}
	}
	// Without a root given the supplier's root is suppliers/<code>, never the
	// whole bucket, which would let its key reach other suppliers' documents;
	// a second put replaces the document.
	c.ok("document", "put", "BARE", "a.pdf", src)
	c.ok("document", "put", "BARE", "a.pdf", src)
	if _, err := os.Stat(filepath.Join(store, "suppliers/BARE/a.pdf")); err != nil {
		t.Error(err)
	}

	c.fails("not a normalised relative path", "document", "put", "ACME", "../escape.pdf", src)
	c.fails("not a normalised relative path", "document", "put", "ACME", "/../escape.pdf", src)
	// A leading slash is still relative to the root (spec 2.8).
	if err := json.Unmarshal([]byte(c.ok("document", "put", "ACME", "/abs.pdf", src, "--json")), &out); err != nil {
		t.Fatal(err)
	}
	if out["key"] != "imports/acme/abs.pdf" {
		t.Errorf("put /abs.pdf: key %v, want imports/acme/abs.pdf", out["key"])
	}
	c.fails("does not exist", "document", "put", "NOPE", "a.pdf", src)
	c.fails("no such file", "document", "put", "ACME", "a.pdf", filepath.Join(t.TempDir(), "missing.pdf"))
	c.fails("accepts 3 arg", "document", "put", "ACME", "a.pdf")
	c.env["DOCUMENTS_URL"] = "nope://bucket"
	c.fails("DOCUMENTS_URL", "document", "put", "ACME", "a.pdf", src)
	delete(c.env, "DOCUMENTS_URL")
	c.fails("DOCUMENTS_URL", "document", "put", "ACME", "a.pdf", src)
}
