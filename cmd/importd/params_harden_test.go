package main

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// A path or query parameter that is not UTF-8 or holds a NUL reached
// PostgreSQL as the argument of a lookup, which refused it, and the request
// was answered 500 internal_error; enough of them paged the on-call
// through ImportdHighErrorRate. Each is now a 400 that names the
// parameter, before any query runs, and the answers match the OpenAPI
// document. A tab, which an account number may hold, still reaches E10.
func TestHarden_MalformedParametersAreRefusedBeforeTheDatabase(t *testing.T) {
	t.Parallel()
	s := startService(t, "api", map[string]string{"MONITORING_USER": pageUser, "MONITORING_PASSWORD": pagePass})
	seedDemo(t, s, admin.Supplier{})
	c := newChecked(t, s)
	tok := s.accessToken(t, s.newKey(t, "params"))

	type fieldError struct{ Code, Attr string }
	type answer struct {
		Status int
		Code   string
		Errors []fieldError
	}
	refused := func(code, attr string) answer {
		return answer{http.StatusBadRequest, code, []fieldError{{code, attr}}}
	}
	const (
		e10   = "/v1/data-import/account-transfer-status/"
		e11   = "/v1/data-import/all-account-import-processes/"
		e12   = "/v1/data-import/pending-account-import-processes/"
		e13   = "/v1/data-import/imported-account-import-processes/"
		recon = "/v1/data-import/reconciliation/"
	)
	cases := []struct {
		name, path string
		page       bool // the migration page, with the MONITORING_USER login
		want       answer
	}{
		{"E10 account number not UTF-8", e10 + "DEMO/%FF%FE/", false, refused("invalid_encoding", "external_account_number")},
		{"E10 account number with a NUL", e10 + "DEMO/%00/", false, refused("null_characters_not_allowed", "external_account_number")},
		{"E10 supplier not UTF-8", e10 + "%FF/A-1/", false, refused("invalid_encoding", "supplier")},
		{"E10 supplier with a NUL", e10 + "DE%00MO/A-1/", false, refused("null_characters_not_allowed", "supplier")},
		{"E11 after not UTF-8", e11 + "DEMO/?after=%FF%FE", false, refused("invalid_encoding", "after")},
		{"E12 after with a NUL", e12 + "DEMO/?after=A%00", false, refused("null_characters_not_allowed", "after")},
		{"E13 supplier not UTF-8", e13 + "%C3%28/", false, refused("invalid_encoding", "supplier")},
		{"reconciliation after not UTF-8", recon + "DEMO/?after=%FF%FE", false, refused("invalid_encoding", "after")},
		{"reconciliation after with a NUL", recon + "DEMO/?after=%00", false, refused("null_characters_not_allowed", "after")},
		{"E11 supplier and after at once", e11 + "%FF/?after=%00&limit=5", false, answer{http.StatusBadRequest, "invalid",
			[]fieldError{{"invalid_encoding", "supplier"}, {"null_characters_not_allowed", "after"}}}},
		{"migration summary of a supplier not UTF-8", "/migration/%FF/summary.json", true, refused("invalid_encoding", "supplier")},
		{"migration summary of a supplier with a NUL", "/migration/%00/summary.json", true, refused("null_characters_not_allowed", "supplier")},
		{"migration summary with an attr not UTF-8", "/migration/DEMO/summary.json?code=x&attr=%FF", true, refused("invalid_encoding", "attr")},
		{"E10 account number with a tab", e10 + "DEMO/A%09B/", false, answer{http.StatusNotFound, "import_process_does_not_exist", nil}},
		{"E11 after with a tab", e11 + "DEMO/?after=A%09", false, answer{http.StatusOK, "", nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r response
			if tc.page {
				req, _ := http.NewRequest("GET", s.base+tc.path, nil)
				req.SetBasicAuth(pageUser, pagePass)
				r = c.doReq(t, req)
			} else {
				r = c.do(t, "GET", tc.path, tok, nil)
			}
			got := answer{Status: r.Status}
			got.Code, _ = r.Body["code"].(string)
			errs, _ := r.Body["errors"].([]any)
			for _, e := range errs {
				m, _ := e.(map[string]any)
				code, _ := m["code"].(string)
				attr, _ := m["attr"].(string)
				got.Errors = append(got.Errors, fieldError{code, attr})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s\n%.500s", tc.path, diff, r.Raw)
			}
		})
	}
}
