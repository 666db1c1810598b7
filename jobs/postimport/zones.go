package postimport

import (
	"context"
	"sync"
	"time"

	"github.com/bulkimport/bulkimport/db"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// zoneTTL is how long a supplier's time zone is remembered: a zone the
// operator changes holds on every replica within it, and a busy migration
// reads it once in that time rather than once per request. It is the
// service's one bound for a supplier's zone (v.ZoneTTL).
const zoneTTL = v.ZoneTTL

// zones remembers each import supplier's time zone, in which "today" is
// dated for the rules that compare a date with it (transaction_in_future,
// the open statement period, historical_statement_period_end_in_future).
type zones struct {
	db  *db.DB
	mu  sync.Mutex
	m   map[string]zoneEntry
	now func() time.Time
}

type zoneEntry struct {
	name string
	read time.Time
}

func newZones(d *db.DB, now func() time.Time) *zones {
	return &zones{db: d, m: map[string]zoneEntry{}, now: now}
}

// today is the date of t in supplier's time zone (validate.DateIn). A
// supplier that does not exist, or a database out of reach, dates it in
// UTC: the request's own checks of the supplier report the first, and the
// second fails the request anyway.
func (z *zones) today(ctx context.Context, supplier string, t time.Time) v.Date {
	return v.DateIn(t, z.zone(ctx, supplier))
}

func (z *zones) zone(ctx context.Context, supplier string) string {
	z.mu.Lock()
	e, ok := z.m[supplier]
	z.mu.Unlock()
	if ok && z.now().Sub(e.read) < zoneTTL {
		return e.name
	}
	var name string
	if err := z.db.GetContext(ctx, &name, `SELECT time_zone FROM import_suppliers WHERE code = $1`, supplier); err != nil {
		return ""
	}
	z.mu.Lock()
	z.m[supplier] = zoneEntry{name: name, read: z.now()}
	z.mu.Unlock()
	return name
}
