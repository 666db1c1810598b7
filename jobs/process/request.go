package process

import (
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// ParseRequest decodes and checks the body of E5, reporting every problem
// at its own attr.
func ParseRequest(body []byte) (Request, error) {
	var r Request
	v, err := validate.Parse(body)
	if err != nil {
		return r, problem.New(problem.Invalid, "parse_error", "Malformed JSON: "+err.Error())
	}
	if v.Kind != validate.KindObject {
		return r, problem.New(problem.Invalid, "parse_error", "The request body must be a JSON object, not "+v.Kind.String()+".")
	}
	var errs problem.List
	seen := map[string]bool{}
	str := func(m validate.Member, dst *string) {
		switch {
		case m.Value.Kind != validate.KindString:
			errs.Add(m.Key, "invalid", "Must be a string, not %s.", m.Value.Kind)
		case m.Value.Text == "":
			errs.Add(m.Key, "blank", "May not be blank.")
		default:
			*dst = m.Value.Text
		}
	}
	for _, m := range v.Members {
		if seen[m.Key] {
			errs.Add(m.Key, "duplicate_key", "The key %q appears more than once.", m.Key)
			continue
		}
		seen[m.Key] = true
		switch m.Key {
		case "external_account_number":
			str(m, &r.ExternalAccountNumber)
		case "import_supplier_code":
			str(m, &r.ImportSupplierCode)
		case "operations_team_name":
			str(m, &r.OperationsTeamName)
		case "dry_run":
			if m.Value.Kind != validate.KindBool {
				errs.Add(m.Key, "invalid", "Must be a boolean, not %s.", m.Value.Kind)
			}
			r.DryRun = m.Value.Bool
		default:
			errs.Add(m.Key, "unknown_field", "%q is not a field of this request.", m.Key)
		}
	}
	for _, k := range []string{"external_account_number", "import_supplier_code", "operations_team_name"} {
		if !seen[k] {
			errs.Add(k, "required", "This field is required.")
		}
	}
	if err := errs.Err("invalid_request", "The request is not valid."); err != nil {
		return r, err
	}
	return r, nil
}
