package main

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/accountview"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// The account detail route answers with an API key the document that
// accountview.Load reads from the database (what `importctl account show
// --json` prints), for the suppliers the key sees; a key of another
// supplier gets the 404 of a missing supplier, as E10 answers it.
func TestAccountDetail_AnswersTheAccountViewWithinTheKeysScope(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", nil)
	seedDemo(t, s, admin.Supplier{})
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "OTHER"}); err != nil {
		t.Fatal(err)
	}
	insertImportedAccount(t, s, "AD-1", "A-0AD00001", "", day(-30))
	demo := s.accessToken(t, s.newKey(t, "detail-demo", "DEMO"))
	other := s.accessToken(t, s.newKey(t, "detail-other", "OTHER"))

	v, err := accountview.Load(context.Background(), s.db, "DEMO", "AD-1")
	if err != nil {
		t.Fatal(err)
	}
	wantDoc, _ := json.Marshal(v)
	var want any
	_ = json.Unmarshal(wantDoc, &want)
	r := s.do(t, http.MethodGet, "/v1/data-import/account/DEMO/AD-1/", demo, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("account detail: %d %s", r.Status, r.Raw)
	}
	var got any
	if err := json.Unmarshal(r.Raw, &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the answer is not the account view (-load +answer):\n%s", d)
	}

	type refusal struct {
		Status int
		Code   any
	}
	for _, c := range []struct {
		name, path, token string
		want              refusal
	}{
		{"another supplier's key", "/v1/data-import/account/DEMO/AD-1/", other, refusal{404, "import_supplier_not_found"}},
		{"no such account", "/v1/data-import/account/DEMO/NOPE/", demo, refusal{404, "import_process_does_not_exist"}},
		{"no token", "/v1/data-import/account/DEMO/AD-1/", "", refusal{401, "not_authenticated"}},
	} {
		r := s.do(t, http.MethodGet, c.path, c.token, nil)
		if d := cmp.Diff(c.want, refusal{r.Status, r.Body["code"]}); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
}
