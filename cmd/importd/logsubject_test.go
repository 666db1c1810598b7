package main

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// The request line of an account's E3, E4, E5 and E6 names the supplier and
// the external account number of its body, accepted or refused, as the
// handler's own parse found them (the body is decoded once).
func TestLogs_RequestLineNamesTheAccountOfTheBody(t *testing.T) {
	t.Parallel()
	var logs lockedBuffer
	s := startServiceLogging(t, "api", map[string]string{"LOG_LEVEL": "info"}, &logs)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "logs"))
	invalid := fixture(t, "LOG-2")
	invalid["customers"] = "not a list"
	calls := []struct {
		path string
		body any
	}{
		{pathValidateAccount, fixture(t, "LOG-1")},
		{pathValidateAccount, invalid},
		{stagePath, fixture(t, "LOG-3")},
		{processPath, map[string]any{"import_supplier_code": "DEMO", "external_account_number": "LOG-4", "operations_team_name": "Ops"}},
		{pathNotes, map[string]any{"import_supplier": "DEMO", "external_account_number": "LOG-5", "notes": []any{}}},
		{pathValidateAccount, "not an object"},
	}
	for _, c := range calls {
		s.do(t, "POST", c.path, tok, c.body)
	}
	type line struct{ Status, Supplier, Number string }
	var got []line
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l struct {
			Msg, Route, Supplier string
			Status               json.Number
			Number               string `json:"external_account_number"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Msg != "request" || !strings.HasPrefix(l.Route, "/v1/data-import/") {
			continue
		}
		got = append(got, line{l.Status.String(), l.Supplier, l.Number})
	}
	want := []line{{"200", "DEMO", "LOG-1"}, {"400", "DEMO", "LOG-2"}, {"201", "DEMO", "LOG-3"},
		{"400", "DEMO", "LOG-4"}, {"404", "DEMO", "LOG-5"}, {"400", "", ""}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request lines (-want +got):\n%s", diff)
	}
}
