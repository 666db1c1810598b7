package postimport

import (
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Period is an inclusive range of dates.
type Period struct {
	From, To validate.Date
}

// openPeriod returns the open statement period of an account whose closed
// history ends on closedEnd: from the day after, to today. When the closed
// history ends today (or, for a statement, later), the period is its first
// day alone, so that it is never empty and a forced transaction always has
// a date to move to.
func openPeriod(closedEnd, today validate.Date) Period {
	from := validate.DateOf(closedEnd.Time().AddDate(0, 0, 1))
	to := today
	if to < from {
		to = from
	}
	return Period{From: from, To: to}
}

// closedEndSQL is where the account with id $1 has its closed history end:
// the latest historical statement's bill_period_to_date; without a
// statement, the account's last_billed_to_date; without that, its creation
// date (UTC). Run it after locking the account, so that no statement import
// moves the end in between.
const closedEndSQL = `SELECT to_char(COALESCE(
		(SELECT max(h.bill_period_to_date) FROM historical_statements h WHERE h.account_id = a.id),
		a.last_billed_to_date,
		(a.created_at AT TIME ZONE 'UTC')::date), 'YYYY-MM-DD')
	FROM accounts a WHERE a.id = $1`
