package imports

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/bulkimport/bulkimport/db"
	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// refusal is a staging_refusals row as the tests compare it.
type refusal struct {
	Supplier string
	EAN      string
	Step     string
	Code     string   // the top-level code
	Fields   []string // "code@attr" of each field error
}

// refusals reads every staging_refusals row, by supplier and account number.
func refusals(t *testing.T, d *db.DB) []refusal {
	t.Helper()
	var rows []struct {
		Supplier string `db:"code"`
		EAN      string `db:"external_account_number"`
		Step     string `db:"step"`
		Error    []byte `db:"error"`
	}
	if err := d.Select(&rows, `SELECT s.code, r.external_account_number, r.step, r.error
		FROM staging_refusals r JOIN import_suppliers s ON s.id = r.supplier_id
		ORDER BY s.code, r.external_account_number`); err != nil {
		t.Fatal(err)
	}
	var out []refusal
	for _, r := range rows {
		var rec problem.Record
		if err := json.Unmarshal(r.Error, &rec); err != nil {
			t.Fatal(err)
		}
		got := refusal{Supplier: r.Supplier, EAN: r.EAN, Step: r.Step, Code: rec.Code}
		for _, e := range rec.Errors {
			got.Fields = append(got.Fields, e.Code+"@"+e.Attr)
		}
		out = append(out, got)
	}
	return out
}

// refusedCounters returns the counters of refused accounts by supplier
// code and of their errors by "code@attr", as the progress page sums them,
// and fails t unless they equal a recount from staging_refusals.
func refusedCounters(t *testing.T, d *db.DB) (accounts map[string]int64, errors map[string]int64) {
	t.Helper()
	read := func(q string) map[string]int64 {
		var rows []struct {
			K string `db:"k"`
			N int64  `db:"n"`
		}
		if err := d.Select(&rows, q); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, r := range rows {
			out[r.K] = r.N
		}
		return out
	}
	accounts = read(`SELECT s.code AS k, sum(c.n) AS n FROM progress_counts c JOIN import_suppliers s ON s.id = c.supplier_id
		WHERE c.state IN ('refused', 'refused_not_ongoing') GROUP BY 1 HAVING sum(c.n) <> 0`)
	recount := read(`SELECT s.code AS k, count(*) AS n FROM staging_refusals r JOIN import_suppliers s ON s.id = r.supplier_id GROUP BY 1`)
	if diff := cmp.Diff(recount, accounts); diff != "" {
		t.Errorf("refused counters against a recount (-want +got):\n%s", diff)
	}
	// Each in its state: a refusal because the supplier was not Ongoing
	// apart from the accounts' own (migration 00056).
	states := read(`SELECT s.code || ':' || c.state AS k, sum(c.n) AS n FROM progress_counts c JOIN import_suppliers s ON s.id = c.supplier_id
		WHERE c.state IN ('refused', 'refused_not_ongoing') GROUP BY 1 HAVING sum(c.n) <> 0`)
	recount = read(`SELECT s.code || ':' || CASE WHEN r.error->>'code' = '` + CodeSupplierNotOngoing + `' THEN 'refused_not_ongoing' ELSE 'refused' END AS k,
		count(*) AS n FROM staging_refusals r JOIN import_suppliers s ON s.id = r.supplier_id GROUP BY 1`)
	if diff := cmp.Diff(recount, states); diff != "" {
		t.Errorf("refused counters by state against a recount (-want +got):\n%s", diff)
	}
	// No process of these tests has failed, so every error counted is a
	// refusal's.
	errors = read(`SELECT code || '@' || attr AS k, sum(n) AS n FROM progress_errors GROUP BY 1 HAVING sum(n) <> 0`)
	recount = read(`SELECT e.code || '@' || e.attr AS k, count(*) AS n FROM staging_refusals r, progress_error_pairs(r.error) e GROUP BY 1`)
	if diff := cmp.Diff(recount, errors); diff != "" {
		t.Errorf("error counters against a recount (-want +got):\n%s", diff)
	}
	return accounts, errors
}

// Payloads of the fixture that validation refuses, each for one reason.
func badPhone(t *testing.T, supplier, ean string) []byte {
	t.Helper()
	return replaceOnce(t, fixture(t, supplier, ean), `"mobile": "+44 7911 123456"`, `"mobile": "12"`)
}

func badPostcode(t *testing.T, supplier, ean string) []byte {
	t.Helper()
	return replaceOnce(t, fixture(t, supplier, ean), `"supply_postcode": "M20 2GL"`, `"supply_postcode": "NOT A POSTCODE"`)
}

func replaceOnce(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if bytes.Count(b, []byte(old)) != 1 {
		t.Fatalf("the fixture has %q %d times, want once", old, bytes.Count(b, []byte(old)))
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

const (
	phoneField    = account.CodeInvalidPhoneNumber + "@customers.0.mobile"
	postcodeField = account.CodeInvalidPostcode + "@supply_addresses.0.supply_postcode"
)

// A refused E3 or E4 is kept as the account's one row, the latest refusal
// winning (step and errors); the counters follow it; and a staging that
// succeeds deletes it, in the staging statement.
func TestStage_LatestRefusalIsKeptUntilTheAccountStages(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	ctx := context.Background()
	steps := []struct {
		name   string
		run    func() error
		want   []refusal
		errors map[string]int64
	}{
		{"refused at E3", func() error { _, err := s.Validate(ctx, badPhone(t, "DEMO", "A-1"), allVisible); return err },
			[]refusal{{"DEMO", "A-1", StepValidate, account.CodeFailedValidation, []string{phoneField}}},
			map[string]int64{phoneField: 1}},
		{"refused at E4 for another reason: the latest wins", func() error {
			_, err := s.Stage(ctx, badPostcode(t, "DEMO", "A-1"), allVisible)
			return err
		},
			[]refusal{{"DEMO", "A-1", StepStage, account.CodeFailedValidation, []string{postcodeField}}},
			map[string]int64{postcodeField: 1}},
		{"refused at E3 again", func() error { _, err := s.Validate(ctx, badPhone(t, "DEMO", "A-1"), allVisible); return err },
			[]refusal{{"DEMO", "A-1", StepValidate, account.CodeFailedValidation, []string{phoneField}}},
			map[string]int64{phoneField: 1}},
		{"another account refused", func() error { _, err := s.Stage(ctx, badPhone(t, "DEMO", "A-2"), allVisible); return err },
			[]refusal{
				{"DEMO", "A-1", StepValidate, account.CodeFailedValidation, []string{phoneField}},
				{"DEMO", "A-2", StepStage, account.CodeFailedValidation, []string{phoneField}},
			},
			map[string]int64{phoneField: 2}},
	}
	for _, st := range steps {
		err := st.run()
		if p, ok := problem.As(err); !ok || p.Kind != problem.Invalid || p.Code != account.CodeFailedValidation {
			t.Fatalf("%s: %v, want the refusal %s", st.name, err, account.CodeFailedValidation)
		}
		if diff := cmp.Diff(st.want, refusals(t, d)); diff != "" {
			t.Errorf("%s: refusals (-want +got):\n%s", st.name, diff)
		}
		accounts, errors := refusedCounters(t, d)
		if diff := cmp.Diff(map[string]int64{"DEMO": int64(len(st.want))}, accounts); diff != "" {
			t.Errorf("%s: refused accounts counted (-want +got):\n%s", st.name, diff)
		}
		if diff := cmp.Diff(st.errors, errors); diff != "" {
			t.Errorf("%s: errors counted (-want +got):\n%s", st.name, diff)
		}
	}

	// A successful E3 is no staging: the refusal stays.
	if _, err := s.Validate(ctx, fixture(t, "DEMO", "A-1"), allVisible); err != nil {
		t.Fatal(err)
	}
	if got := len(refusals(t, d)); got != 2 {
		t.Errorf("after a valid E3: %d refusals, want 2", got)
	}
	// Staging A-1 deletes its refusal, and only its.
	if res, err := s.Stage(ctx, fixture(t, "DEMO", "A-1"), allVisible); err != nil || !res.Created {
		t.Fatalf("staging: %+v, %v", res, err)
	}
	want := []refusal{{"DEMO", "A-2", StepStage, account.CodeFailedValidation, []string{phoneField}}}
	if diff := cmp.Diff(want, refusals(t, d)); diff != "" {
		t.Errorf("after staging A-1: refusals (-want +got):\n%s", diff)
	}
	accounts, errors := refusedCounters(t, d)
	if diff := cmp.Diff(map[string]int64{"DEMO": 1}, accounts); diff != "" {
		t.Errorf("after staging A-1: refused accounts counted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int64{phoneField: 1}, errors); diff != "" {
		t.Errorf("after staging A-1: errors counted (-want +got):\n%s", diff)
	}
	// Staged accounts refused later (the staged data stays) and staged
	// again: restaging clears it too.
	if _, err := s.Stage(ctx, badPhone(t, "DEMO", "A-1"), allVisible); err == nil {
		t.Fatal("an invalid restaging was accepted")
	}
	if got := len(refusals(t, d)); got != 2 {
		t.Errorf("after refusing a staged account: %d refusals, want 2", got)
	}
	if res, err := s.Stage(ctx, fixture(t, "DEMO", "A-1"), allVisible); err != nil || res.Created {
		t.Fatalf("restaging: %+v, %v", res, err)
	}
	if diff := cmp.Diff(want, refusals(t, d)); diff != "" {
		t.Errorf("after restaging A-1: refusals (-want +got):\n%s", diff)
	}
}

// However often and however concurrently an account is refused, it has one
// row, and it is counted once.
func TestStage_ManyRefusalsOfAnAccountKeepOneRow(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	d.SetMaxOpenConns(8)
	s := New(d)
	ctx := context.Background()
	bodies := [][]byte{badPhone(t, "DEMO", "MANY"), badPostcode(t, "DEMO", "MANY")}
	var wg sync.WaitGroup
	errs := make(chan error, 8*10)
	for w := range 8 {
		wg.Go(func() {
			for i := range 10 {
				var err error
				if (w+i)%2 == 0 {
					_, err = s.Validate(ctx, bodies[i%2], allVisible)
				} else {
					_, err = s.Stage(ctx, bodies[i%2], allVisible)
				}
				if p, ok := problem.As(err); !ok || p.Kind != problem.Invalid {
					errs <- fmt.Errorf("worker %d, attempt %d: %v, want a refusal", w, i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	got := refusals(t, d)
	if len(got) != 1 || got[0].EAN != "MANY" {
		t.Fatalf("refusals %+v, want one row for MANY", got)
	}
	accounts, errors := refusedCounters(t, d)
	if accounts["DEMO"] != 1 {
		t.Errorf("refused accounts counted %v, want DEMO: 1", accounts)
	}
	var sum int64
	for _, n := range errors {
		sum += n
	}
	if sum != 1 {
		t.Errorf("errors counted %v, want the one of the latest refusal", errors)
	}
}

// A refusal is recorded only for an account it names, of a supplier the
// caller may see, that keeps the account out; the others leave no row.
func TestStage_RefusalsThatNameNoAccountOrDoNotKeepItOutAreNotRecorded(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO", "HIDDEN", "PAUSED")
	s := New(d)
	ctx := context.Background()
	exec(t, d, `UPDATE import_suppliers SET status = 'Paused' WHERE code = 'PAUSED'`)
	exec(t, d, `INSERT INTO skipped_accounts (supplier_id, external_account_number) SELECT id, 'SKIP' FROM import_suppliers WHERE code = 'DEMO'`)
	for _, ean := range []string{"IMPORTED", "BUSY"} {
		if _, err := s.Stage(ctx, fixture(t, "DEMO", ean), allVisible); err != nil {
			t.Fatal(err)
		}
	}
	exec(t, d, `UPDATE import_processes SET status = 'COMPLETED', service_account_number = 'A-0000BEEF', account_created_at = now()
		WHERE external_account_number = 'IMPORTED'`)
	exec(t, d, `UPDATE import_processes SET status = 'IN_PROGRESS' WHERE external_account_number = 'BUSY'`)
	notHidden := func(code string) bool { return code != "HIDDEN" }
	long := strings.Repeat("L", 129)
	cases := []struct {
		name    string
		body    []byte
		visible func(string) bool
		code    string // the answer's code
	}{
		{"body that does not parse", []byte(`{"import_supplier": "DEMO", "external_account_number": "X-1"`), allVisible, "parse_error"},
		{"no account number", replaceOnce(t, badPhone(t, "DEMO", "X"), `"external_account_number": "X",`, ""), allVisible, account.CodeFailedValidation},
		{"account number too long", badPhone(t, "DEMO", long), allVisible, account.CodeFailedValidation},
		{"unknown supplier", badPhone(t, "NOPE", "X-2"), allVisible, account.CodeFailedValidation},
		{"supplier the caller may not see", badPhone(t, "HIDDEN", "X-3"), notHidden, account.CodeFailedValidation},
		{"account created already, invalid payload", badPhone(t, "DEMO", "IMPORTED"), allVisible, account.CodeFailedValidation},
		{"account created already", fixture(t, "DEMO", "IMPORTED"), allVisible, CodeAlreadyImported},
		{"account being created", fixture(t, "DEMO", "BUSY"), allVisible, CodeInProgress},
		{"account marked to be skipped", fixture(t, "DEMO", "SKIP"), allVisible, CodeSkipped},
	}
	for _, tc := range cases {
		for _, step := range []string{StepValidate, StepStage} {
			var err error
			if step == StepValidate {
				_, err = s.Validate(ctx, tc.body, tc.visible)
			} else {
				_, err = s.Stage(ctx, tc.body, tc.visible)
			}
			p, ok := problem.As(err)
			wantCode := tc.code
			if step == StepValidate && (tc.code == CodeInProgress || tc.code == CodeSkipped) {
				wantCode = "" // E3 checks the payload and the import only
			}
			switch {
			case wantCode == "" && err != nil:
				t.Errorf("%s at %s: %v, want no refusal", tc.name, step, err)
			case wantCode != "" && (!ok || p.Code != wantCode):
				t.Errorf("%s at %s: %v, want the refusal %s", tc.name, step, err, wantCode)
			}
		}
	}
	if got := refusals(t, d); len(got) != 0 {
		t.Errorf("refusals recorded: %+v, want none", got)
	}
	// A supplier that does not accept accounts keeps them out: recorded.
	_, err := s.Stage(ctx, fixture(t, "PAUSED", "P-1"), allVisible)
	if p, ok := problem.As(err); !ok || p.Code != CodeSupplierNotOngoing {
		t.Fatalf("staging for a paused supplier: %v", err)
	}
	want := []refusal{{"PAUSED", "P-1", StepStage, CodeSupplierNotOngoing, []string{CodeSupplierNotOngoing + "@import_supplier"}}}
	if diff := cmp.Diff(want, refusals(t, d)); diff != "" {
		t.Errorf("refusals (-want +got):\n%s", diff)
	}
	refusedCounters(t, d)
}

// An account refused after it was staged, then created from the data
// staged first, is in: its creation deletes the refusal.
func TestStage_CreationOfTheAccountClearsItsRefusal(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	ctx := context.Background()
	if _, err := s.Stage(ctx, fixture(t, "DEMO", "A-1"), allVisible); err != nil {
		t.Fatal(err)
	}
	for _, ean := range []string{"A-1", "A-2"} {
		if _, err := s.Stage(ctx, badPhone(t, "DEMO", ean), allVisible); err == nil {
			t.Fatalf("%s: an invalid staging was accepted", ean)
		}
	}
	// E5's marks, as the worker writes them (jobs/creation): in progress,
	// which keeps the refusal, then created.
	exec(t, d, `UPDATE import_processes SET status = 'IN_PROGRESS' WHERE external_account_number = 'A-1'`)
	if got := len(refusals(t, d)); got != 2 {
		t.Fatalf("after the in-progress mark: %d refusals, want 2", got)
	}
	exec(t, d, `UPDATE import_processes SET status = 'COMPLETED', service_account_number = 'A-0000BEEF', account_created_at = now()
		WHERE external_account_number = 'A-1'`)
	want := []refusal{{"DEMO", "A-2", StepStage, account.CodeFailedValidation, []string{phoneField}}}
	if diff := cmp.Diff(want, refusals(t, d)); diff != "" {
		t.Errorf("after creating A-1: refusals (-want +got):\n%s", diff)
	}
	accounts, _ := refusedCounters(t, d)
	if accounts["DEMO"] != 1 {
		t.Errorf("refused accounts counted %v, want DEMO: 1", accounts)
	}
}

// A refusal that cannot be recorded is answered all the same, and logged.
func TestStage_RefusalThatCannotBeRecordedIsStillAnswered(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	exec(t, d, `CREATE FUNCTION refuse_refusal() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'no refusals today'; END $$`)
	exec(t, d, `CREATE TRIGGER refuse_refusal BEFORE INSERT ON staging_refusals FOR EACH ROW EXECUTE FUNCTION refuse_refusal()`)
	var logged bytes.Buffer // written by the calls below only
	s := New(d).WithLog(slog.New(slog.NewTextHandler(&logged, nil)))
	ctx := context.Background()
	_, errValidate := s.Validate(ctx, badPhone(t, "DEMO", "A-1"), allVisible)
	_, errStage := s.Stage(ctx, badPhone(t, "DEMO", "A-1"), allVisible)
	for step, err := range map[string]error{StepValidate: errValidate, StepStage: errStage} {
		if p, ok := problem.As(err); !ok || p.Kind != problem.Invalid || p.Code != account.CodeFailedValidation {
			t.Errorf("%s: %v, want the refusal %s", step, err, account.CodeFailedValidation)
		}
	}
	if n := strings.Count(logged.String(), "staging refusal not recorded"); n != 2 || !strings.Contains(logged.String(), "no refusals today") {
		t.Errorf("log %q, want two warnings with the cause", logged.String())
	}
	// Staging still works, and finds nothing to delete.
	if _, err := s.Stage(ctx, fixture(t, "DEMO", "A-1"), allVisible); err != nil {
		t.Fatal(err)
	}
}

// A refusal row keeps a bounded record: the first MaxRefusalErrors field
// errors and the count of the others, each text cut at its bound. The
// migration that bounded the rows stored before (00051) cuts a record as
// boundRefusal does: its statement, run here on a row stored whole, leaves
// the record boundRefusal makes.
func TestBoundRefusal_TheMigrationBoundsAsGoDoes(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	long := func(s string, n int) string { return strings.Repeat(s, n) }
	rec := problem.Record{Code: "invalid", Detail: long("é", 600)}
	for i := range 990 {
		rec.Errors = append(rec.Errors, problem.FieldError{
			Code: long("c", 150), Attr: fmt.Sprintf("%d.", i) + long("a", 9000), Detail: long("ü", 501)})
	}
	rec.Errors[1] = problem.FieldError{Code: "short", Attr: "customers.0.mobile", Detail: long("d", 500)}
	whole, _ := json.Marshal(rec)
	exec(t, d, `INSERT INTO staging_refusals (supplier_id, external_account_number, step, error)
		SELECT id, 'WHOLE', 'validate', $1 FROM import_suppliers WHERE code = 'DEMO'`, string(whole))
	up, err := os.ReadFile("../../db/migrations/00051_bound_staging_refusals.sql")
	if err != nil {
		t.Fatal(err)
	}
	stmt, _, _ := strings.Cut(string(up), "-- +goose StatementEnd")
	_, stmt, _ = strings.Cut(stmt, "-- +goose StatementBegin")
	exec(t, d, stmt)

	var stored []byte
	if err := d.Get(&stored, `SELECT error FROM staging_refusals WHERE external_account_number = 'WHOLE'`); err != nil {
		t.Fatal(err)
	}
	var got problem.Record
	if err := json.Unmarshal(stored, &got); err != nil {
		t.Fatal(err)
	}
	want := boundRefusal(rec)
	// Through JSON, as the page reads it: the count is a number.
	var wantJSON problem.Record
	b, _ := json.Marshal(want)
	_ = json.Unmarshal(b, &wantJSON)
	if d := cmp.Diff(wantJSON, got); d != "" {
		t.Errorf("the migration's record against boundRefusal's (-want +got):\n%s", d)
	}
	if n := len(stored); n > maxRefusalBytes {
		t.Errorf("the bounded record is %d bytes, over %d", n, maxRefusalBytes)
	}
	if d := cmp.Diff(map[string]any{ErrorsOmitted: float64(970)}, wantJSON.Extra); d != "" {
		t.Errorf("errors left out (-want +got):\n%s", d)
	}
	for _, e := range want.Errors[2:] {
		if n := utf8.RuneCountInString(e.Attr); n != MaxRefusalAttr || !strings.HasSuffix(e.Attr, "…") {
			t.Fatalf("attr of %d characters %.20q…, want %d ending in an ellipsis", n, e.Attr, MaxRefusalAttr)
		}
	}
	_, counted := refusedCounters(t, d)
	if n := len(counted); n != MaxRefusalErrors {
		t.Errorf("%d (code, attr) pairs counted after the migration, want %d", n, MaxRefusalErrors)
	}
}

// maxRefusalBytes is the most a bounded record can take: every text at its
// bound in characters of four bytes, and room for the JSON around them.
const maxRefusalBytes = (MaxRefusalErrors+1)*(MaxRefusalCode+MaxRefusalAttr+MaxRefusalDetail)*4 + 4096

// An E3 refused for 990 unknown fields of 9,000-character names (an
// 8.9 MB body) was answered whole, as it should be, and stored whole: a
// 17.9 MB row. The row now keeps MaxRefusalErrors errors, each cut.
func TestValidate_ARefusalOfAHugeBodyIsStoredBounded(t *testing.T) {
	t.Parallel()
	d := newDB(t, "DEMO")
	s := New(d)
	body := fixture(t, "DEMO", "HUGE")
	var extra strings.Builder
	for i := range 990 {
		fmt.Fprintf(&extra, `"%d%s": 1, `, i, strings.Repeat("x", 9000))
	}
	body = replaceOnce(t, body, `"import_supplier": "DEMO",`, `"import_supplier": "DEMO", `+extra.String())
	_, err := s.Validate(context.Background(), body, allVisible)
	p, ok := problem.As(err)
	// The answer lists the unknown fields until the bound of one
	// request's problems (validate.MaxProblemBytes): far more than a row
	// keeps.
	if !ok || len(p.Errors) <= 2*MaxRefusalErrors {
		t.Fatalf("Validate: %v (%d errors), want a refusal listing many of the 990 unknown fields", err, len(p.Errors))
	}
	var size int
	if err := d.Get(&size, `SELECT octet_length(error::text) FROM staging_refusals WHERE external_account_number = 'HUGE'`); err != nil {
		t.Fatal(err)
	}
	if size > maxRefusalBytes {
		t.Errorf("the refusal row holds %d bytes, over %d", size, maxRefusalBytes)
	}
	got := refusals(t, d)
	if len(got) != 1 || len(got[0].Fields) != MaxRefusalErrors {
		t.Errorf("stored %v, want one refusal of %d errors", got, MaxRefusalErrors)
	}
}
