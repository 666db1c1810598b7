package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/jobs/accountview"
	jr "github.com/bulkimport/bulkimport/jobs/reconcile"
)

// Difference is one value of an account whose digest differs, a row of
// differences.csv: its path in the canonical form (jobs/reconcile.Diff:
// notes.0.body, transactions[ID].amount) and the JSON of the cohort's value
// and of the service's; on the side that does not have the member (a note
// added, a statement deleted) the value is absent: left out of the NDJSON,
// an empty cell in the CSV.
type Difference struct {
	ExternalAccountNumber string          `json:"external_account_number"`
	Path                  string          `json:"path"`
	Cohort                json.RawMessage `json:"cohort,omitempty"`
	Service               json.RawMessage `json:"service,omitempty"`
	Line                  int             `json:"line"`
}

// DefaultDrillDown is how many accounts whose digest differs are read in
// full by default: enough for any tampering or partial failure a person
// reads row by row, few enough that a cohort reconciled against the wrong
// service does not make tens of thousands of requests.
const DefaultDrillDown = 1000

// errAccountGone is the service's answer for an account it no longer has
// (deleted since the stream gave it).
var errAccountGone = errors.New("the account is no longer in the service")

// codeNoProcess is the account detail's 404 for an account number the
// supplier has no import process of (imports.CodeImportProcessDoesNotExist;
// cmd/importctl talks HTTP and does not import the service's packages for
// their codes).
const codeNoProcess = "import_process_does_not_exist"

// detail reads the service's detail of one account, the document
// importctl account show prints (migrate.AccountPath), sent as the runner
// sends its requests (migrate.Tokens.Get: token renewal, waits after a
// 429, retries of a 5xx or a failed connection).
func (r *remote) detail(ctx context.Context, ext string) (*accountview.Account, error) {
	status, b, err := r.tokens.Get(ctx, migrate.AccountPath(r.supplier, ext))
	if err != nil {
		return nil, fmt.Errorf("cannot read the detail of account %s: %w", ext, err)
	}
	if status == http.StatusOK {
		var v accountview.View
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("the detail of account %s: %w", ext, err)
		}
		if v.Account == nil { // staged again, not created
			return nil, errAccountGone
		}
		return v.Account, nil
	}
	var answer struct{ Code string }
	_ = json.Unmarshal(b, &answer)
	if status == http.StatusNotFound && answer.Code == codeNoProcess {
		return nil, errAccountGone
	}
	return nil, fmt.Errorf("the detail of account %s answered %d: %s", ext, status, strings.Join(strings.Fields(string(b)), " "))
}

// drillDown compares the canonical form of the cohort line with the one
// built, by the stream's own code (jobs/reconcile.CanonicalFromView), from
// the service's detail of the account, and returns the values that differ.
// None when the account is gone or has changed back since the stream gave
// it.
func (r *remote) drillDown(ctx context.Context, e entry) ([]jr.PathDifference, error) {
	rec, err := cohort.Parse(e.line)
	if err != nil {
		return nil, err
	}
	want, err := jr.CohortCanonical(ctx, jr.Line{Account: rec.Account, Notes: rec.Notes, Transactions: rec.Transactions,
		Statements: rec.Statements, PaymentInstruction: rec.PaymentInstruction}, r.country)
	if err != nil {
		return nil, err
	}
	a, err := r.detail(ctx, e.ext)
	if errors.Is(err, errAccountGone) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	got, err := jr.CanonicalFromView(e.ext, a)
	if err != nil {
		return nil, fmt.Errorf("the detail of account %s: %w", e.ext, err)
	}
	return jr.Diff(want, got), nil
}

// cell is a value of differences.csv: a string as it is, any other JSON
// value as JSON, an absent one empty.
func cell(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	var s string
	if v[0] == '"' && json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
