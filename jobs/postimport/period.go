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
// account a, as YYYY-MM-DD. The rule lives in SQL alone, in
// account_first_open_day (db/migrations), because post_transactions checks
// it under the account's lock too; read it with the account locked, so that
// no statement import moves the start in between.
const firstOpenDayExpr = `to_char(account_first_open_day(a.id), 'YYYY-MM-DD')`
