package process

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// pair is the code and attr of one problem; details are free wording.
type pair struct{ Code, Attr string }

func pairsOf(t *testing.T, err error) (string, []pair) {
	t.Helper()
	var pe *problem.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %v (%T) is not a *problem.Error", err, err)
	}
	if pe.Kind != problem.Invalid {
		t.Errorf("kind = %v, want Invalid", pe.Kind)
	}
	var got []pair
	for _, e := range pe.Errors {
		got = append(got, pair{e.Code, e.Attr})
	}
	return pe.Code, got
}

func TestParseRequest_BindsTheBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want Request
	}{
		{"without dry_run", `{"external_account_number":"A-1","import_supplier_code":"DEMO","operations_team_name":"Ops"}`,
			Request{ExternalAccountNumber: "A-1", ImportSupplierCode: "DEMO", OperationsTeamName: "Ops"}},
		{"dry run", `{"dry_run":true,"external_account_number":"A-1","import_supplier_code":"DEMO","operations_team_name":"Ops"}`,
			Request{ExternalAccountNumber: "A-1", ImportSupplierCode: "DEMO", OperationsTeamName: "Ops", DryRun: true}},
		{"dry_run false", `{"external_account_number":"A-1","import_supplier_code":"DEMO","operations_team_name":"Ops","dry_run":false}`,
			Request{ExternalAccountNumber: "A-1", ImportSupplierCode: "DEMO", OperationsTeamName: "Ops"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRequest(t.Context(), []byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
		})
	}
}

// E5's strings get the checks of every schema string, with the codes E4
// answers for the same values (see TestProcess_BadStringsAnswerAsStaging in
// cmd/importd for the two endpoints side by side).
func TestParseRequest_RefusesEachProblemAtItsAttr(t *testing.T) {
	t.Parallel()
	const ok = `"external_account_number":"A-1","import_supplier_code":"DEMO","operations_team_name":"Ops"`
	tests := []struct {
		name string
		body string
		want []pair
	}{
		{"NUL character", `{"external_account_number":"A\u0000","import_supplier_code":"DEMO","operations_team_name":"Ops"}`,
			[]pair{{"null_characters_not_allowed", "external_account_number"}}},
		{"spaces only", `{"external_account_number":"   ","import_supplier_code":"DEMO","operations_team_name":"Ops"}`,
			[]pair{{"blank", "external_account_number"}}},
		{"empty strings", `{"external_account_number":"","import_supplier_code":"","operations_team_name":"\t"}`,
			[]pair{{"blank", "external_account_number"}, {"blank", "import_supplier_code"}, {"blank", "operations_team_name"}}},
		{"missing fields", `{}`,
			[]pair{{"required", "external_account_number"}, {"required", "import_supplier_code"}, {"required", "operations_team_name"}}},
		{"wrong types", `{"external_account_number":1,"import_supplier_code":null,"operations_team_name":["Ops"],"dry_run":"yes"}`,
			[]pair{{"invalid", "external_account_number"}, {"invalid", "import_supplier_code"}, {"invalid", "operations_team_name"}, {"invalid", "dry_run"}}},
		{"null dry_run", `{` + ok + `,"dry_run":null}`, []pair{{"invalid", "dry_run"}}},
		{"unknown field", `{` + ok + `,"extra":1}`, []pair{{"unknown_field", "extra"}}},
		{"duplicate key", `{` + ok + `,"dry_run":true,"dry_run":false}`, []pair{{"duplicate_key", "dry_run"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseRequest(t.Context(), []byte(tt.body))
			code, got := pairsOf(t, err)
			if code != CodeInvalidRequest {
				t.Errorf("code = %q, want %q", code, CodeInvalidRequest)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRequest_BodyThatIsNotAnObjectIsAParseError(t *testing.T) {
	t.Parallel()
	for _, body := range []string{``, `{"external_account_number":`, `[]`, `"x"`, "{\"a\":\"\xff\"}"} {
		_, err := ParseRequest(t.Context(), []byte(body))
		code, got := pairsOf(t, err)
		if code != "parse_error" || got != nil {
			t.Errorf("ParseRequest(%q) = %s %v, want parse_error without entries", body, code, got)
		}
	}
}

// FuzzParseRequest checks that any body gets a Request whose strings are
// storable and not blank, or a refusal with one of the two top-level codes.
func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"external_account_number":"A-1","import_supplier_code":"DEMO","operations_team_name":"Ops","dry_run":true}`,
		`{"external_account_number":"A\u0000","import_supplier_code":" ","operations_team_name":"Ops"}`,
		`{"dry_run":1e2}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseRequest(t.Context(), body)
		if err != nil {
			var pe *problem.Error
			if !errors.As(err, &pe) || (pe.Code != "parse_error" && pe.Code != CodeInvalidRequest) {
				t.Fatalf("ParseRequest(%q) error = %v", body, err)
			}
			return
		}
		for _, s := range []string{r.ExternalAccountNumber, r.ImportSupplierCode, r.OperationsTeamName} {
			if strings.TrimSpace(s) == "" || strings.IndexByte(s, 0) >= 0 {
				t.Fatalf("ParseRequest(%q) accepted %q", body, s)
			}
		}
	})
}
