// Package progress answers how a supplier's migration is going: accounts by
// state, completions and failures per minute, the most frequent errors, the
// failed accounts and the depth of the accounts queue. It serves the
// migration progress page (/migration/).
//
// Every figure except the failed accounts comes from counters that triggers
// on import_processes keep in the same transaction as each status change
// (migrations 00015 and 00019), so a summary costs the same for ten accounts
// as for millions. The counters are logs of deltas, appended by each
// statement that changes processes and summed by the reader, so that
// concurrent changes never wait on each other's counter rows; Compact folds
// them, from the worker's sweep and before each read here. The failed
// accounts are read through partial indexes over failed processes only.
//
// Accounts refused at staging (E3 or E4) never become import processes;
// jobs/imports keeps the latest refusal of each in staging_refusals
// (migration 00043), whose triggers count them in the same counters (the
// state "refused", or "refused_not_ongoing" for a refusal because the
// supplier was not Ongoing; their errors among the top errors; the
// refusals per minute, migration 00056). The failed accounts list them
// beside the failed processes, each with its step.
package progress

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

// The states of an import process, as counted.
const (
	StateStaged     = "staged"      // staged, not processed yet
	StateInProgress = "in_progress" // queued or being processed
	StateCompleted  = "completed"   // its account exists
	StateFailed     = "failed"      // its last processing failed (last_error)
	// StateRefused counts accounts whose latest staging was refused
	// (staging_refusals); it is not a state of an import process.
	StateRefused = "refused"
	// StateRefusedNotOngoing counts accounts whose latest staging was
	// refused because the supplier was not Ongoing
	// (imports.CodeSupplierNotOngoing, migration 00056): the supplier's
	// refusal, not one of the account's data, counted apart from
	// StateRefused.
	StateRefusedNotOngoing = "refused_not_ongoing"
)

// StepProcess is the step of a failed process in the failed accounts: E5
// (account creation). A refused account has the step of its refusal,
// imports.StepValidate (E3) or imports.StepStage (E4).
const StepProcess = "process"

// The per-minute series starts at the supplier's first minute with
// progress (a completion, a failure or a refusal) within MaxWindow and ends
// at the minute of now, so that the chart's axis is the run's: a run of
// five minutes fills it instead of being a spike in the last 8% of a fixed
// hour. It shows at least MinWindow, so that a run just started (or none)
// has an axis of a few points to grow along. MaxWindow bounds the points
// the page fetches every few seconds.
const (
	MinWindow = 5 * time.Minute
	MaxWindow = 24 * time.Hour
)

// TopErrors is how many (code, attr) pairs a summary lists.
const TopErrors = 10

// PageSize is how many failed accounts a summary lists at a time.
const PageSize = 50

// QueueInspector is the part of *asynq.Inspector a summary uses.
type QueueInspector interface {
	Queues() ([]string, error)
	GetQueueInfo(queue string) (*asynq.QueueInfo, error)
}

// Service reads migration progress. Its zero value is not usable; use New.
type Service struct {
	db   *db.DB
	insp QueueInspector
	now  func() time.Time
}

// New returns a Service reading d and, for the queue depth, insp.
func New(d *db.DB, insp QueueInspector) *Service {
	return &Service{db: d, insp: insp, now: time.Now}
}

// Counts are a supplier's import processes by state, its accounts refused
// at staging, and its skip marks. Total is the sum of the four states of
// import processes. Refused and skip marks are counted apart: an account
// refused at staging has no process unless an earlier staging made one
// (whose state is then counted too), and a mark may exist for an account
// that was never staged.
type Counts struct {
	Staged     int64 `json:"staged"`
	InProgress int64 `json:"in_progress"`
	Completed  int64 `json:"completed"`
	Failed     int64 `json:"failed"`
	Total      int64 `json:"total"`
	// Refused counts the accounts whose latest E3 or E4 was refused and
	// that have not been staged or created since, for a reason of their
	// own: RefusedNotOngoing is not in it.
	Refused int64 `json:"refused"`
	// RefusedNotOngoing counts the accounts whose latest E4 was refused
	// because the supplier was not Ongoing (paused, say): the supplier's
	// refusal, shown apart so that a pause does not look like invalid
	// accounts. Staging them again once the supplier is Ongoing clears it.
	RefusedNotOngoing int64 `json:"refused_not_ongoing"`
	SkipMarks         int64 `json:"skip_marks"`
}

// SupplierProgress is one line of the index of suppliers.
type SupplierProgress struct {
	Code   string `json:"code"`
	Status string `json:"status"`
	Counts Counts `json:"counts"`
}

// Minute is one point of the per-minute series: accounts completed,
// failures recorded and refusals at staging (E3 or E4, each refusal of an
// account again counted again; not those of a supplier that was not
// Ongoing) during the minute that starts at Minute.
type Minute struct {
	Minute    time.Time `json:"minute"`
	Completed int64     `json:"completed"`
	Failed    int64     `json:"failed"`
	Refused   int64     `json:"refused"`
}

// ErrorCount is how many failed or refused accounts have an error with
// Code at Attr in their last error or refusal. Attr is empty for an error
// without field errors.
type ErrorCount struct {
	Code     string `json:"code"`
	Attr     string `json:"attr"`
	Accounts int64  `json:"accounts"`
}

// FailedAccount is one failed or refused account: the step that failed or
// refused it, the error shown (the first one that matches the filter, else
// the first one), how many other errors its last attempt had, and when it
// failed.
type FailedAccount struct {
	ExternalAccountNumber string `json:"external_account_number"`
	// Step is StepProcess for a failed process, imports.StepValidate or
	// imports.StepStage for an account refused at E3 or E4.
	Step        string    `json:"step"`
	Code        string    `json:"code"`
	Attr        string    `json:"attr"`
	Detail      string    `json:"detail"`
	OtherErrors int       `json:"other_errors"`
	FailedAt    time.Time `json:"failed_at"`
	// TaskID is the account's task in the accounts queue, as Asynqmon
	// names it; empty for a refused account, which has no task.
	TaskID string `json:"task_id"`
}

// FailedPage is one page of failed and refused accounts, newest failure
// first. Next is the cursor of the following page, empty on the last one.
type FailedPage struct {
	Code     string          `json:"code"`
	Attr     string          `json:"attr"`
	Accounts []FailedAccount `json:"accounts"`
	Next     string          `json:"next"`
}

// Queue is the depth of the accounts queue, shared by every supplier.
// Available is false when Redis could not be asked.
type Queue struct {
	Name      string `json:"name"`
	Available bool   `json:"available"`
	Pending   int    `json:"pending"`
	Active    int    `json:"active"`
	Scheduled int    `json:"scheduled"`
	Retry     int    `json:"retry"`
	Archived  int    `json:"archived"`
}

// Summary is everything the supplier page shows.
type Summary struct {
	Supplier    SupplierProgress `json:"supplier"`
	GeneratedAt time.Time        `json:"generated_at"`
	PerMinute   []Minute         `json:"per_minute"`
	TopErrors   []ErrorCount     `json:"top_errors"`
	Failed      FailedPage       `json:"failed"`
	// Queue is nil for a caller limited to some suppliers: the queue holds
	// every supplier's tasks.
	Queue *Queue `json:"queue"`
}

// Filter selects the failed accounts of a summary: those with an error of
// Code (at Attr, when set), after the cursor Before.
type Filter struct {
	Code   string
	Attr   string
	Before string
}

// maxFilterLength bounds the code and attr of a filter; longer ones match
// nothing that the service records.
const maxFilterLength = 200

// Compact folds the counters' committed deltas into one row per key
// (progress_compact, migration 00019) and returns how many rows it folded.
// Deltas accumulate by one to three rows per status change; folding them
// keeps a summary's sums short. It never waits for a status change, and a
// compaction already running makes it return 0 at once.
func Compact(ctx context.Context, d *db.DB) (int64, error) {
	var n int64
	if err := d.GetContext(ctx, &n, `SELECT progress_compact()`); err != nil {
		return 0, fmt.Errorf("progress: compact: %w", err)
	}
	return n, nil
}

// Suppliers lists the suppliers visible reports true for, by code, with
// their counts.
func (s *Service) Suppliers(ctx context.Context, visible func(string) bool) ([]SupplierProgress, error) {
	var rows []struct {
		Code   string `db:"code"`
		Status string `db:"status"`
		countsRow
	}
	err := s.db.SelectContext(ctx, &rows, `
		SELECT s.code, s.status, `+countsColumns+`,
		       (SELECT count(*) FROM skipped_accounts k WHERE k.supplier_id = s.id) AS skip_marks
		FROM import_suppliers s
		LEFT JOIN progress_counts c ON c.supplier_id = s.id
		GROUP BY s.id
		ORDER BY s.code`)
	if err != nil {
		return nil, fmt.Errorf("progress: suppliers: %w", err)
	}
	out := []SupplierProgress{}
	for _, r := range rows {
		if visible(r.Code) {
			out = append(out, SupplierProgress{Code: r.Code, Status: r.Status, Counts: r.counts()})
		}
	}
	return out, nil
}

// countsColumns sums the counter deltas of progress_counts c by state.
const countsColumns = `
		coalesce(sum(c.n) FILTER (WHERE c.state = 'staged'), 0) AS staged,
		coalesce(sum(c.n) FILTER (WHERE c.state = 'in_progress'), 0) AS in_progress,
		coalesce(sum(c.n) FILTER (WHERE c.state = 'completed'), 0) AS completed,
		coalesce(sum(c.n) FILTER (WHERE c.state = 'failed'), 0) AS failed,
		coalesce(sum(c.n) FILTER (WHERE c.state = 'refused'), 0) AS refused,
		coalesce(sum(c.n) FILTER (WHERE c.state = 'refused_not_ongoing'), 0) AS refused_not_ongoing`

type countsRow struct {
	Staged     int64 `db:"staged"`
	InProgress int64 `db:"in_progress"`
	Completed  int64 `db:"completed"`
	Failed     int64 `db:"failed"`
	Refused    int64 `db:"refused"`
	NotOngoing int64 `db:"refused_not_ongoing"`
	SkipMarks  int64 `db:"skip_marks"`
}

func (r countsRow) counts() Counts {
	return Counts{Staged: r.Staged, InProgress: r.InProgress, Completed: r.Completed, Failed: r.Failed,
		Total: r.Staged + r.InProgress + r.Completed + r.Failed, Refused: r.Refused, RefusedNotOngoing: r.NotOngoing,
		SkipMarks: r.SkipMarks}
}

// Summarize returns the summary of supplier code. A supplier that visible
// refuses is reported exactly like a missing one (NotFound,
// import_supplier_not_found). withQueue asks Redis for the queue depth; a
// caller limited to some suppliers must not see it. A malformed filter is
// Invalid (invalid, at code, attr or before).
func (s *Service) Summarize(ctx context.Context, code string, f Filter, visible func(string) bool, withQueue bool) (Summary, error) {
	before, err := checkFilter(f)
	if err != nil {
		return Summary{}, err
	}
	// No compaction here: the sums are right without it, and the worker's
	// sweep folds the deltas every 5 s. One per request let a client that
	// asked 785 times a second slow every supplier's status changes.
	var sup struct {
		ID     int64  `db:"id"`
		Code   string `db:"code"`
		Status string `db:"status"`
		countsRow
	}
	err = s.db.GetContext(ctx, &sup, `
		SELECT s.id, s.code, s.status, `+countsColumns+`,
		       (SELECT count(*) FROM skipped_accounts k WHERE k.supplier_id = s.id) AS skip_marks
		FROM import_suppliers s
		LEFT JOIN progress_counts c ON c.supplier_id = s.id
		WHERE s.code = $1
		GROUP BY s.id`, code)
	if errors.Is(err, db.ErrNotFound) || err == nil && !visible(sup.Code) {
		return Summary{}, problem.New(problem.NotFound, imports.CodeImportSupplierNotFound, "Import supplier "+code+" does not exist.")
	}
	if err != nil {
		return Summary{}, fmt.Errorf("progress: supplier: %w", err)
	}
	now := s.now().UTC()
	sum := Summary{
		Supplier:    SupplierProgress{Code: sup.Code, Status: sup.Status, Counts: sup.counts()},
		GeneratedAt: now,
	}
	if sum.PerMinute, err = s.perMinute(ctx, sup.ID, now); err != nil {
		return Summary{}, err
	}
	if sum.TopErrors, err = s.topErrors(ctx, sup.ID); err != nil {
		return Summary{}, err
	}
	if sum.Failed, err = s.failed(ctx, sup.ID, sup.Code, f, before); err != nil {
		return Summary{}, err
	}
	if withQueue {
		sum.Queue = s.queue()
	}
	return sum, nil
}

// perMinute returns one point per minute, zeros included, from the
// supplier's first minute with progress within MaxWindow (or MinWindow
// back, whichever is earlier) to the minute of now.
func (s *Service) perMinute(ctx context.Context, supplierID int64, now time.Time) ([]Minute, error) {
	last := now.Truncate(time.Minute)
	earliest := last.Add(-MaxWindow + time.Minute)
	var rows []Minute
	err := s.db.SelectContext(ctx, &rows, `
		SELECT minute, sum(completed) AS completed, sum(failed) AS failed, sum(refused) AS refused
		FROM progress_minutes
		WHERE supplier_id = $1 AND minute >= $2 AND minute <= $3
		GROUP BY minute`, supplierID, earliest, last)
	if err != nil {
		return nil, fmt.Errorf("progress: per minute: %w", err)
	}
	first := last.Add(-MinWindow + time.Minute)
	byMinute := make(map[int64]Minute, len(rows))
	for _, r := range rows {
		byMinute[r.Minute.Unix()] = r
		if m := r.Minute.Truncate(time.Minute); m.Before(first) {
			first = m
		}
	}
	out := make([]Minute, 0, int(last.Sub(first)/time.Minute)+1)
	for m := first; !m.After(last); m = m.Add(time.Minute) {
		p := byMinute[m.Unix()]
		out = append(out, Minute{Minute: m, Completed: p.Completed, Failed: p.Failed, Refused: p.Refused})
	}
	return out, nil
}

func (s *Service) topErrors(ctx context.Context, supplierID int64) ([]ErrorCount, error) {
	out := []ErrorCount{}
	err := s.db.SelectContext(ctx, &out, `
		SELECT code, attr, sum(n) AS accounts
		FROM progress_errors
		WHERE supplier_id = $1
		GROUP BY code, attr
		HAVING sum(n) > 0
		ORDER BY accounts DESC, code, attr
		LIMIT $2`, supplierID, TopErrors)
	if err != nil {
		return nil, fmt.Errorf("progress: top errors: %w", err)
	}
	return out, nil
}

// failed reads one page of failed processes and refused accounts, merged
// newest first. Each source is read with the conditions of its indexes:
// the partial indexes import_processes_failed (order and cursor) and
// import_processes_failed_errors (the filter's containment), and
// staging_refusals_newest and staging_refusals_errors; each gives at most
// a page, and the merge keeps the newest page of the two.
func (s *Service) failed(ctx context.Context, supplierID int64, supplierCode string, f Filter, before cursor) (FailedPage, error) {
	args := []any{supplierID}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	var filter string
	if f.Code != "" {
		field := map[string]string{"code": f.Code}
		if f.Attr != "" {
			field["attr"] = f.Attr
		}
		inErrors, _ := json.Marshal(map[string]any{"errors": []any{field}})
		filter = "{error} @> " + arg(string(inErrors)) + "::jsonb"
		if f.Attr == "" {
			top, _ := json.Marshal(map[string]string{"code": f.Code})
			filter = "(" + filter + " OR {error} @> " + arg(string(top)) + "::jsonb)"
		}
		filter = " AND " + filter
	}
	// filterOn is the filter on the error column of one source.
	filterOn := func(column string) string { return strings.ReplaceAll(filter, "{error}", column) }
	// The page is in the order (time, source, id) descending, source 1 for
	// refusals and 0 for processes, so that the cursor is a total order;
	// for each source the cursor becomes a condition on its own index.
	after := func(src int, at, id string) string {
		switch {
		case before.id == 0:
			return ""
		case src == before.src:
			return fmt.Sprintf(" AND (%s, %s) < (%s, %s)", at, id, arg(before.at), arg(before.id))
		case src < before.src:
			return fmt.Sprintf(" AND %s <= %s", at, arg(before.at))
		default:
			return fmt.Sprintf(" AND %s < %s", at, arg(before.at))
		}
	}
	limit := arg(PageSize + 1)
	// Only what a row shows leaves the database: the error the row names
	// (the first, or the first the filter matches; the record's own code
	// and detail when it has no field errors), each text cut to the bounds
	// of a stored refusal, and the count of the others. A refusal row once
	// held a 17.9 MB record, and reading a page of them whole took seconds
	// and hundreds of megabytes per summary.
	match := "NULL::jsonb"
	if f.Code != "" {
		match = `jsonb_path_query_first(u.error, '$.errors[*] ? (@.code == $c && ($a == "" || @.attr == $a))',
			jsonb_build_object('c', ` + arg(f.Code) + `::text, 'a', ` + arg(f.Attr) + `::text))`
	}
	q := `SELECT u.src, u.id, u.external_account_number, u.step, u.at,
			left(CASE WHEN s.e IS NULL THEN u.error->>'code' ELSE s.e->>'code' END, ` + arg(imports.MaxRefusalCode) + `) AS code,
			left(CASE WHEN s.e IS NULL THEN '' ELSE s.e->>'attr' END, ` + arg(imports.MaxRefusalAttr) + `) AS attr,
			left(CASE WHEN s.e IS NULL THEN u.error->>'detail' ELSE s.e->>'detail' END, ` + arg(imports.MaxRefusalDetail) + `) AS detail,
			greatest(CASE WHEN jsonb_typeof(u.error->'errors') = 'array' THEN jsonb_array_length(u.error->'errors') ELSE 0 END - 1, 0)
				+ CASE WHEN jsonb_typeof(u.error->'extra'->'` + imports.ErrorsOmitted + `') = 'number'
					THEN (u.error->'extra'->>'` + imports.ErrorsOmitted + `')::int ELSE 0 END AS other_errors
		FROM ((SELECT ` + strconv.Itoa(srcProcess) + ` AS src, id, external_account_number, '` + StepProcess + `' AS step, updated_at AS at, last_error AS error
		FROM import_processes
		WHERE supplier_id = $1 AND status = '` + status.Unknown + `' AND last_error IS NOT NULL` +
		after(srcProcess, "updated_at", "id") + filterOn("last_error") + `
		ORDER BY updated_at DESC, id DESC LIMIT ` + limit + `)
		UNION ALL
		(SELECT ` + strconv.Itoa(srcRefusal) + `, id, external_account_number, step, refused_at, error
		FROM staging_refusals
		WHERE supplier_id = $1` +
		after(srcRefusal, "refused_at", "id") + filterOn("error") + `
		ORDER BY refused_at DESC, id DESC LIMIT ` + limit + `)
		ORDER BY at DESC, src DESC, id DESC LIMIT ` + limit + `) u
		CROSS JOIN LATERAL (SELECT COALESCE(` + match + `,
			CASE WHEN jsonb_typeof(u.error->'errors') = 'array' THEN u.error->'errors'->0 END) AS e) s
		ORDER BY u.at DESC, u.src DESC, u.id DESC`
	var rows []struct {
		Src         int            `db:"src"`
		ID          int64          `db:"id"`
		Number      string         `db:"external_account_number"`
		Step        string         `db:"step"`
		At          time.Time      `db:"at"`
		Code        sql.NullString `db:"code"`
		Attr        sql.NullString `db:"attr"`
		Detail      sql.NullString `db:"detail"`
		OtherErrors int            `db:"other_errors"`
	}
	// Planned for the values at hand: only with the filter's value does
	// PostgreSQL see (from the column's statistics) whether a code is
	// common, best read newest first, or rare, best found through the
	// containment index. A generic plan reads newest first for every code,
	// which for a code that no row has reads every row of the supplier
	// (0.8 s for a million refusals).
	if err := s.db.SelectPlannedForArgs(ctx, &rows, q, args...); err != nil {
		return FailedPage{}, fmt.Errorf("progress: failed accounts: %w", err)
	}
	page := FailedPage{Code: f.Code, Attr: f.Attr, Accounts: []FailedAccount{}}
	for i, r := range rows {
		if i == PageSize {
			prev := rows[i-1]
			page.Next = cursor{at: prev.At, src: prev.Src, id: prev.ID}.String()
			break
		}
		a := FailedAccount{
			ExternalAccountNumber: r.Number, Step: r.Step, Code: r.Code.String, Attr: r.Attr.String, Detail: r.Detail.String,
			OtherErrors: r.OtherErrors, FailedAt: r.At.UTC(),
		}
		if r.Src == srcProcess {
			a.TaskID = jobs.AccountTaskID(supplierCode, r.Number, false)
		}
		page.Accounts = append(page.Accounts, a)
	}
	return page, nil
}

// queue asks Redis for the depth of the accounts queue. Asynq knows a
// queue only once a task was enqueued to it; until then it is empty.
func (s *Service) queue() *Queue {
	q := &Queue{Name: jobs.QueueAccounts}
	if s.insp == nil {
		return q
	}
	known, err := s.insp.Queues()
	if err != nil {
		return q
	}
	q.Available = true
	if !slices.Contains(known, jobs.QueueAccounts) {
		return q
	}
	info, err := s.insp.GetQueueInfo(jobs.QueueAccounts)
	if err != nil {
		q.Available = false
		return q
	}
	q.Pending, q.Active, q.Scheduled, q.Retry, q.Archived = info.Pending, info.Active, info.Scheduled, info.Retry, info.Archived
	return q
}

func checkFilter(f Filter) (cursor, error) {
	var errs problem.List
	for _, p := range []struct{ attr, value string }{{"code", f.Code}, {"attr", f.Attr}} {
		if len(p.value) > maxFilterLength || !utf8.ValidString(p.value) || strings.ContainsFunc(p.value, unicode.IsControl) {
			errs.Add(p.attr, "invalid", "A %s is text of at most %d characters, without control characters.", p.attr, maxFilterLength)
		}
	}
	if f.Attr != "" && f.Code == "" {
		errs.Add("attr", "invalid", "Filter by attr only together with a code.")
	}
	c, err := parseCursor(f.Before)
	if err != nil {
		errs.Add("before", "invalid", "%s", err.Error())
	}
	if e := errs.Err("invalid", "The filter of failed accounts is invalid."); e != nil {
		return cursor{}, e
	}
	return c, nil
}
