package migrate

import (
	"encoding/json"
	"net/http"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
)

// Step is one request made for an account, named by the spec's endpoint.
type Step string

// The steps, in the order a real run makes them: the extras (E6 to E9)
// need the account that E5 creates.
const (
	StepValidate           Step = "E3 validate"
	StepStage              Step = "E4 stage"
	StepProcess            Step = "E5 process"
	StepNotes              Step = "E6 notes"
	StepTransactions       Step = "E7 transactions"
	StepStatements         Step = "E8 statements"
	StepPaymentInstruction Step = "E9 payment instruction"
	// StepParse is a cohort line that could not be read; it is reported,
	// never sent.
	StepParse Step = "cohort line"
)

// Codes that say a step was done before: the service's idempotency
// answers a repeat with them, so a resumed run counts them as success.
const (
	codeAlreadyImported    = "account_import_process_already_imported"
	codeImportInProgress   = "account_import_in_progress"
	codeDryRunRolledBack   = "dry_run_rolled_back"
	codeStatementExists    = "historical_statement_already_exists"
	codeInstructionExists  = "payment_instruction_already_exists"
	codeServiceUnreachable = "service_unreachable"
)

// request is what a step sends, or nothing when the line has no data for it.
func request(s Step, rec cohort.Record, team string, dryRun bool) (path string, body []byte, ok bool) {
	ident := func(extra map[string]any) []byte {
		m := map[string]any{"import_supplier": rec.ImportSupplier, "external_account_number": rec.ExternalAccountNumber}
		for k, v := range extra {
			m[k] = v
		}
		b, _ := json.Marshal(m)
		return b
	}
	switch s {
	case StepValidate:
		return "/v1/data-import/validate-account/", rec.Account, true
	case StepStage:
		return "/v1/data-import/account-import-process/create-or-update/", rec.Account, true
	case StepProcess:
		m := map[string]any{"import_supplier_code": rec.ImportSupplier, "external_account_number": rec.ExternalAccountNumber,
			"operations_team_name": team}
		if dryRun {
			m["dry_run"] = true
		}
		b, _ := json.Marshal(m)
		return "/v1/data-import/account-import-process/process/", b, true
	case StepNotes:
		if len(rec.Notes) == 0 {
			return "", nil, false
		}
		return "/v1/data-import/notes/create/", ident(map[string]any{"notes": rec.Notes}), true
	case StepTransactions:
		if len(rec.Transactions) == 0 {
			return "", nil, false
		}
		return "/v1/data-import/transactions/create/", ident(map[string]any{"transactions": rec.Transactions}), true
	case StepStatements:
		if len(rec.Statements) == 0 {
			return "", nil, false
		}
		return "/v1/data-import/historical-statements/create/", ident(map[string]any{"statements": rec.Statements}), true
	case StepPaymentInstruction:
		if len(rec.PaymentInstruction) == 0 {
			return "", nil, false
		}
		var pi map[string]any
		if err := json.Unmarshal(rec.PaymentInstruction, &pi); err != nil {
			return "", nil, false
		}
		return "/v1/data-import/payment-instruction/create/", ident(pi), true
	}
	return "", nil, false
}

// problemBody is the section 7 error body.
type problemBody struct {
	Detail string `json:"detail"`
	Code   string `json:"code"`
	Errors []struct {
		Detail string `json:"detail"`
		Code   string `json:"code"`
		Attr   string `json:"attr"`
	} `json:"errors"`
	ServiceAccountNumber string `json:"service_account_number"`
	// ErrorDetail is E7's reason of its first failing transaction.
	ErrorDetail string `json:"error_detail"`
}

// succeeded says whether the answer to step s means the step is done.
// Besides the 2xx, it counts the service's answers to a repeat: a staging
// or a processing of an account that was created meanwhile (400 already
// imported, with the service account number: the earlier attempt created
// it, and its 201 was lost), a staging
// refused because an earlier run's E5 is still creating the account, a
// statement or payment instruction stored before, and E5's dry run.
func succeeded(s Step, dryRun bool, a answer) bool {
	if a.Status == http.StatusOK || a.Status == http.StatusCreated {
		return s != StepProcess || !dryRun
	}
	if a.Status != http.StatusBadRequest {
		return false
	}
	var p problemBody
	if json.Unmarshal(a.Body, &p) != nil {
		return false
	}
	switch s {
	case StepStage:
		// In progress: an E5 of an earlier run (stopped while it waited)
		// is creating the account from the data staged then; the E5 that
		// follows joins it.
		return p.Code == codeAlreadyImported || p.Code == codeImportInProgress
	case StepProcess:
		return (p.Code == codeAlreadyImported && p.ServiceAccountNumber != "") || (dryRun && p.Code == codeDryRunRolledBack)
	case StepStatements:
		if len(p.Errors) == 0 {
			return false
		}
		for _, e := range p.Errors {
			if e.Code != codeStatementExists {
				return false
			}
		}
		return true
	case StepPaymentInstruction:
		if p.Code == codeInstructionExists {
			return true
		}
		if len(p.Errors) == 0 {
			return false
		}
		for _, e := range p.Errors {
			if e.Code != codeInstructionExists {
				return false
			}
		}
		return true
	}
	return false
}

// Failure is one row of the failure report: one error item of a refused
// request.
type Failure struct {
	ExternalAccountNumber string `json:"external_account_number"`
	Step                  Step   `json:"step"`
	HTTPStatus            int    `json:"http_status"`
	Code                  string `json:"code"`
	Attr                  string `json:"attr"`
	Detail                string `json:"detail"`
	Line                  int    `json:"line"`
}

// failures turns a refusal into report rows: one per error item, or one
// for the whole answer when it has none.
func failures(s Step, rec cohort.Record, a answer) []Failure {
	base := Failure{ExternalAccountNumber: rec.ExternalAccountNumber, Step: s, HTTPStatus: a.Status, Line: rec.Number}
	var p problemBody
	if err := json.Unmarshal(a.Body, &p); err != nil {
		base.Code, base.Detail = "unreadable_answer", oneLine(a.Body)
		return []Failure{base}
	}
	if len(p.Errors) == 0 {
		base.Code, base.Detail = p.Code, p.Detail
		if p.ErrorDetail != "" {
			base.Detail = p.ErrorDetail
		}
		return []Failure{base}
	}
	out := make([]Failure, len(p.Errors))
	for i, e := range p.Errors {
		f := base
		f.Code, f.Attr, f.Detail = e.Code, e.Attr, e.Detail
		out[i] = f
	}
	return out
}
