package postimport

import (
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Period is the open statement period: From to To, both inclusive. To is
// today. From is after To when the account is billed to today or later;
// then no date can be in the period, and nothing can be moved into it
// either, because a transaction is never moved into the future.
type Period struct {
	From, To validate.Date
}

// Contains reports whether d is in the period.
func (p Period) Contains(d validate.Date) bool { return p.From <= d && d <= p.To }

// Empty reports whether no date is in the period.
func (p Period) Empty() bool { return p.From > p.To }

// firstOpenDayExpr is the first day of the open statement period of the
// account a, as YYYY-MM-DD. The closed history ends at the latest of
//
//   - the latest bill_period_to_date of its historical statements, which is
//     exclusive (statement periods are half-open, as in the reference's
//     example where one statement ends on the day the next begins), so that
//     day is the first open one;
//   - its last_billed_to_date, which is inclusive: the day after is the
//     first open one.
//
// GREATEST ignores a missing one, so importing an old statement never
// reopens a billed period. An account with neither opens on its creation
// date (UTC), so that a transaction dated the day the account was created
// is in its open period. Read it with the account locked, so that no
// statement import moves the start in between.
const firstOpenDayExpr = `to_char(COALESCE(GREATEST(
		(SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
		a.last_billed_to_date + 1),
		(a.created_at AT TIME ZONE 'UTC')::date), 'YYYY-MM-DD')`
