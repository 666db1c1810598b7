package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
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
// importctl account show prints (GET /v1/data-import/account/SUPPLIER/
// NUMBER/), retrying as open does.
func (r *remote) detail(ctx context.Context, ext string) (*accountview.Account, error) {
	renew := false
	var last error
	for try := 0; try <= r.retries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(r.backoff * time.Duration(1<<min(try-1, 5))):
			}
		}
		tok, err := r.tokens.Token(ctx, renew)
		if err != nil {
			return nil, err
		}
		renew = false
		u := r.base + "/v1/data-import/account/" + url.PathEscape(r.supplier) + "/" + url.PathEscape(ext) + "/"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Token "+tok)
		res, err := r.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		if res.StatusCode == http.StatusOK {
			var v accountview.View
			err := json.NewDecoder(res.Body).Decode(&v)
			res.Body.Close()
			switch {
			case err != nil:
				last = fmt.Errorf("the detail of account %s: %w", ext, err)
				continue
			case v.Account == nil: // staged again, not created
				return nil, errAccountGone
			}
			return v.Account, nil
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		var answer struct{ Code string }
		_ = json.Unmarshal(b, &answer)
		switch {
		case res.StatusCode == http.StatusNotFound && answer.Code == codeNoProcess:
			return nil, errAccountGone
		case res.StatusCode == http.StatusUnauthorized:
			renew = true
		}
		last = fmt.Errorf("the detail of account %s answered %d: %s", ext, res.StatusCode, strings.Join(strings.Fields(string(b)), " "))
		if res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusUnauthorized {
			return nil, last
		}
	}
	return nil, fmt.Errorf("cannot read the detail of account %s: %w", ext, last)
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
