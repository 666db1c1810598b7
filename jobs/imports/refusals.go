package imports

import (
	"context"
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// The steps at which an account can be refused before it becomes an import
// process, as staging_refusals.step and the migration progress page name
// them.
const (
	StepValidate = "validate" // E3
	StepStage    = "stage"    // E4
)

// refusalTimeout bounds the write of a refusal. The write must never fail
// or hold up the refusal's answer for long: a database that does not take
// it within this time loses the record (logged), and the client still gets
// its 400.
const refusalTimeout = time.Second

// refusalSQL keeps the latest refusal of an account (migration 00043): one
// row per (supplier, external account number), however often it is
// refused. An account that has been created is not recorded: it is in,
// whatever a later attempt sent.
const refusalSQL = `
		INSERT INTO staging_refusals AS r (supplier_id, external_account_number, step, error, refused_at)
		SELECT $1::bigint, $2::text, $3::text, $4::jsonb, now()
		WHERE NOT EXISTS (SELECT 1 FROM import_processes p
			WHERE p.supplier_id = $1 AND p.external_account_number = $2 AND p.service_account_number IS NOT NULL)
		ON CONFLICT (supplier_id, external_account_number) DO UPDATE
			SET step = EXCLUDED.step, error = EXCLUDED.error, refused_at = EXCLUDED.refused_at`

// shownRefusal returns err as the refusal the migration page shows, or
// false for an error that is not one: a failure of the service (the
// database down, a client that hung up) and the refusals that do not keep
// an account out. Those are an account that is created already or being
// created now (the migration runner counts both as done) and an account
// the operator marked to be skipped (the page counts skip marks apart).
func shownRefusal(err error) (*problem.Error, bool) {
	p, ok := problem.As(err)
	if !ok || p.Kind != problem.Invalid {
		return nil, false
	}
	switch p.Code {
	case CodeAlreadyImported, CodeInProgress, CodeSkipped:
		return nil, false
	}
	return p, true
}

// recordRefusal keeps err as the latest refusal of the account subj names,
// when it is a refusal the page shows and subj names the account (a body
// that does not parse, or whose supplier or account number is missing or
// invalid, names none, and is not recorded). A supplier the caller may not
// see is never found by validation, so a key never records a refusal on
// another supplier's page. Recording happens only on a refusal, and its
// failure is logged, never answered.
func (s *Service) recordRefusal(ctx context.Context, step string, subj account.Subject, err error) {
	p, ok := shownRefusal(err)
	if !ok || !subj.Known() {
		return
	}
	rec, err := json.Marshal(boundRefusal(p.ToRecord()))
	if err != nil {
		s.log.ErrorContext(ctx, "staging refusal not recorded: encode", "error", err.Error())
		return
	}
	// A client that hung up was refused all the same.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), refusalTimeout)
	defer cancel()
	if _, err := s.db.ExecContext(wctx, refusalSQL, subj.SupplierID, subj.ExternalAccountNumber, step, rec); err != nil {
		s.log.WarnContext(ctx, "staging refusal not recorded", "step", step,
			"external_account_number", subj.ExternalAccountNumber, "error", err.Error())
	}
}

// The bounds of what a refusal row stores (boundRefusal). A refusal's
// answer is as large as its body allows: an 8.9 MB E3 body of 990 unknown
// fields with 9,000-character names was refused with a 17.9 MB body, kept
// whole, and four clients grew the database by 649 MB in 30 s, while the
// page that reads the rows shows one error of each. The migration that
// bounded the rows already stored (db/migrations/00051) repeats these
// numbers in SQL; TestBoundRefusal_TheMigrationBoundsAsGoDoes holds the
// two together.
const (
	// MaxRefusalErrors is how many field errors a row keeps; the others
	// are counted in ErrorsOmitted.
	MaxRefusalErrors = 20
	// MaxRefusalCode, MaxRefusalAttr and MaxRefusalDetail bound, in
	// characters, each code, attr and detail kept (the top-level ones
	// too).
	MaxRefusalCode   = 100
	MaxRefusalAttr   = 200
	MaxRefusalDetail = 500
)

// ErrorsOmitted is the key of a stored refusal's Extra that counts the
// field errors boundRefusal left out.
const ErrorsOmitted = "errors_omitted"

// boundRefusal returns rec as a refusal row stores it: at most
// MaxRefusalErrors field errors, each text cut to its bound at a character
// boundary with an ellipsis, and no extra fields but the count of the
// errors left out. The stored record is what the migration page shows;
// the client's answer is never cut.
func boundRefusal(rec problem.Record) problem.Record {
	out := problem.Record{
		Code:   truncate(rec.Code, MaxRefusalCode),
		Detail: truncate(rec.Detail, MaxRefusalDetail),
		Errors: make([]problem.FieldError, 0, min(len(rec.Errors), MaxRefusalErrors)),
	}
	for i, e := range rec.Errors {
		if i == MaxRefusalErrors {
			out.Extra = map[string]any{ErrorsOmitted: len(rec.Errors) - i}
			break
		}
		out.Errors = append(out.Errors, problem.FieldError{
			Code: truncate(e.Code, MaxRefusalCode), Attr: truncate(e.Attr, MaxRefusalAttr), Detail: truncate(e.Detail, MaxRefusalDetail),
		})
	}
	return out
}

// truncate cuts s to at most n characters, the last of them "…" when it
// cut anything. It counts characters, not bytes, as SQL's left() does.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, kept := 0, 0
	for kept < n-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		kept++
	}
	return s[:i] + "…"
}
