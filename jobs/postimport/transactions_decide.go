package postimport

import (
	"fmt"
	"slices"

	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// decision is what a request does with an account's lookup.
type decision struct {
	res *TransactionsResult
	// ts are the request's transactions as they are to be stored (moved
	// into the open period where forced); add indexes those to insert.
	ts     []Transaction
	add    []int
	moved  []string
	period Period
	// errs are the request's problems: the parser's and the lookup's.
	errs problem.List
}

// decideTransactions checks r's transactions against the account's lookup
// l. It changes neither r nor errs, so that a request can decide again on a
// newer lookup.
func decideTransactions(r *TransactionsRequest, opts TransactionOptions, l lookup, today v.Date, errs problem.List) decision {
	d := decision{
		res:    &TransactionsResult{Results: make([]TransactionResult, len(r.Transactions))},
		ts:     slices.Clone(r.Transactions),
		period: Period{From: v.Date(l.FirstOpenDay), To: today},
		errs:   slices.Clone(errs),
	}
	period := d.period
	existing := make(map[string]bool, len(l.Existing))
	for _, id := range l.Existing {
		existing[id] = true
	}
	for i := range d.ts {
		t := &d.ts[i]
		at := func(field string) string { return v.Attr("transactions", i, field) }
		if existing[t.TransactionID] && opts.CheckPreviouslyAdded {
			d.res.Results[i] = TransactionResult{Status: TransactionAlreadyExists,
				TransactionData: TransactionData{Transaction: *t, Status: TransactionImportSuccess}}
			continue
		}
		if namesMissingProduct(*t, l.MissingProducts) {
			d.errs.Add(at("product_code"), CodeProductNotFound, productNotFound, *t.ProductCode)
		}
		// Dates after today were refused already, so a date outside the
		// period is before it. When the period is empty (billed to today
		// or later) there is no day to move to that is not in the future.
		if dt := t.TransactionDate; dt != "" && dt < period.From {
			switch {
			case period.Empty():
				d.errs.Add(at("transaction_date"), CodeNotInOpenPeriod,
					"The transaction date %s is not within the open statement period, which starts on %s, after today; the account is billed to that day, and force_add_to_current_statement never moves a transaction into the future.",
					dt, period.From)
			case opts.ForceAddToCurrentStatement:
				t.OriginalTransactionDate = &dt
				t.TransactionDate = period.From
				desc := fmt.Sprintf("Dated %s in the migrated data; moved to %s, the first day of the open statement period, because force_add_to_current_statement was set.", dt, period.From)
				t.Description = &desc
				d.moved = append(d.moved, fmt.Sprintf("%s (dated %s)", t.TransactionID, dt))
			default:
				d.errs.Add(at("transaction_date"), CodeNotInOpenPeriod,
					"The transaction date %s is not within the open statement period (%s to %s); send force_add_to_current_statement=true to move it into the period.",
					dt, period.From, period.To)
			}
		}
		d.add = append(d.add, i)
		d.res.Results[i] = TransactionResult{Status: TransactionAdded,
			TransactionData: TransactionData{Transaction: *t, Status: TransactionImportSuccess}}
	}
	return d
}
