package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/jmoiron/sqlx"

	"github.com/bulkimport/bulkimport/db"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

func accountBody(ext, vendor, ref, typ string) map[string]any {
	return map[string]any{"import_supplier": "DEMO", "external_account_number": ext, "vendor": vendor, "reference": ref, "type": typ}
}

// The E9 cases of the payment-instruction requirements, each against its
// own simulated vendor.
func TestCreateForAccount_VendorOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	tests := []struct {
		name     string
		vendor   string
		ref      string
		typ      string
		status   int    // 0: success; else the status the kind maps to
		code     string // the top-level code of a failure
		attr     string
		detail   string // part of the detail
		requests int    // how many requests the simulator saw for ref
	}{
		{name: "success", vendor: vendorOK, ref: "CARD-1", typ: TypeCard, requests: 1},
		{name: "direct debit", vendor: vendorOK, ref: "DD-1", typ: TypeDirectDebit, requests: 1},
		{name: "a type the spec does not list (CARD is an example in use)", vendor: vendorOK, ref: "SO-1", typ: "STANDING_ORDER", requests: 1},
		{name: "an unlisted type the vendor does not store", vendor: vendorOK, ref: "CARD-7", typ: "CHEQUE", status: 400,
			code: CodeTypeMismatch, attr: "type", detail: "as CARD, not CHEQUE", requests: 1},
		{name: "unknown reference is persistent", vendor: vendorOK, ref: "NO-SUCH-REF", typ: TypeCard, status: 400,
			code: CodeNotFoundAtVendor, attr: "reference", requests: 1},
		{name: "503 twice then 200 succeeds", vendor: vendorFlaky, ref: "CARD-2", typ: TypeCard, requests: 3},
		{name: "always 503 is intermittent after every attempt", vendor: vendorDown, ref: "CARD-3", typ: TypeCard, status: 500,
			code: CodeVendorUnavailable, detail: "503", requests: testAttempts},
		{name: "hanging past the timeout is intermittent", vendor: vendorSlow, ref: "CARD-4", typ: TypeCard, status: 500,
			code: CodeVendorUnavailable, detail: "did not answer within 150ms", requests: testAttempts},
		{name: "unreachable vendor is intermittent", vendor: vendorGone, ref: "CARD-5", typ: TypeCard, status: 500,
			code: CodeVendorUnavailable, detail: "could not be reached"},
		{name: "type differs from the vendor's", vendor: vendorOK, ref: "CARD-6", typ: TypeDirectDebit, status: 400,
			code: CodeTypeMismatch, attr: "type", detail: "as CARD, not DIRECT_DEBIT", requests: 1},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ext := fmt.Sprintf("ACC-%d", i)
			number := b.account(t, b.demo, ext, 0)
			res, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody(ext, tc.vendor, tc.ref, tc.typ)), visible)
			stored := b.count(t, `SELECT count(*) FROM payment_instructions pi JOIN accounts a ON a.id = pi.account_id
				WHERE a.external_account_number = $1`, ext)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("want success, got %v", err)
				}
				if diff := cmp.Diff(AccountResult{ServiceAccountNumber: number, Reference: tc.ref}, res); diff != "" {
					t.Errorf("result (-want +got):\n%s", diff)
				}
				if stored != 1 {
					t.Errorf("%d instructions stored, want 1", stored)
				}
			} else {
				p := asProblem(t, err)
				kind := map[int]problem.Kind{400: problem.Invalid, 500: problem.RetryableUpstream}[tc.status]
				if p.Kind != kind || p.Code != tc.code || !strings.Contains(p.Detail, tc.detail) {
					t.Errorf("got kind %v code %s detail %q; want kind %v code %s detail with %q", p.Kind, p.Code, p.Detail, kind, tc.code, tc.detail)
				}
				if tc.attr != "" && (len(p.Errors) != 1 || p.Errors[0].Attr != tc.attr) {
					t.Errorf("errors = %+v, want one at %s", p.Errors, tc.attr)
				}
				if stored != 0 {
					t.Errorf("a failed verification stored %d instructions", stored)
				}
			}
			if sim := b.sims[tc.vendor]; sim != nil && sim.Requests(tc.ref) != tc.requests {
				t.Errorf("the vendor was asked %d times, want %d", sim.Requests(tc.ref), tc.requests)
			}
		})
	}
}

func TestCreateForAccount_StoresWhatTheVendorSaid(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.account(t, b.demo, "ACC-1", 0)
	if _, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody("ACC-1", vendorOK, "CARD-7", TypeCard)), visible); err != nil {
		t.Fatal(err)
	}
	var row struct {
		Vendor  string `db:"vendor"`
		Type    string `db:"type"`
		Status  string `db:"vendor_status"`
		Details string `db:"vendor_details"`
	}
	if err := b.db.Get(&row, `SELECT v.name AS vendor, pi.type, pi.vendor_status, pi.vendor_details::text AS vendor_details
		FROM payment_instructions pi JOIN payment_vendors v ON v.id = pi.vendor_id WHERE pi.reference = 'CARD-7'`); err != nil {
		t.Fatal(err)
	}
	want := struct {
		Vendor  string `db:"vendor"`
		Type    string `db:"type"`
		Status  string `db:"vendor_status"`
		Details string `db:"vendor_details"`
	}{vendorOK, TypeCard, "ACTIVE", `{"last4": "4242", "expiry": "2027-08", "limits": {"daily": 250}}`}
	if diff := cmp.Diff(want, row); diff != "" {
		t.Errorf("stored instruction (-want +got):\n%s", diff)
	}
}

// A reference of 512 characters, the reference's maxLength, is accepted
// and stored as sent.
func TestCreateForAccount_ReferenceOf512CharactersIsStored(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.account(t, b.demo, "ACC-1", 0)
	ref := longReference
	if _, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody("ACC-1", vendorOK, ref, TypeCard)), visible); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = $1`, ref); n != 1 {
		t.Errorf("%d instructions stored with the 512-character reference, want 1", n)
	}
}

func TestCreateForAccount_DuplicateReferenceIsRefusedAndStoredOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	number := b.account(t, b.demo, "ACC-1", 0)
	b.account(t, b.demo, "ACC-2", 0)
	if _, err := b.svc.CreateForAccount(ctx, raw(t, accountBody("ACC-1", vendorOK, "CARD-8", TypeCard)), visible); err != nil {
		t.Fatal(err)
	}
	_, err := b.svc.CreateForAccount(ctx, raw(t, accountBody("ACC-1", vendorOK, "CARD-8", TypeCard)), visible)
	p := asProblem(t, err)
	if p.Kind != problem.Invalid || p.Code != CodeAlreadyExists || len(p.Errors) != 1 || p.Errors[0].Attr != "reference" {
		t.Fatalf("repeat: %+v", p)
	}
	if diff := cmp.Diff(map[string]any{"service_account_number": number, "reference": "CARD-8"}, p.Extra); diff != "" {
		t.Errorf("the refusal carries (-want +got):\n%s", diff)
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-8'`); n != 1 {
		t.Errorf("%d instructions stored, want 1", n)
	}
	if n := b.sims[vendorOK].Requests("CARD-8"); n != 1 {
		t.Errorf("the vendor was asked %d times; a known duplicate needs no vendor", n)
	}
	// Another account may hold the same reference.
	if _, err := b.svc.CreateForAccount(ctx, raw(t, accountBody("ACC-2", vendorOK, "CARD-8", TypeCard)), visible); err != nil {
		t.Errorf("the same reference on another account: %v", err)
	}
}

// Requests that arrive together all hear an answer, and the instruction is
// stored once: identical ones share one verification task; the others lose
// at the unique index and hear that it exists.
func TestCreateForAccount_ConcurrentRequestsStoreOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.account(t, b.demo, "ACC-1", 0)
	const n = 6
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			typ := TypeCard
			body := accountBody("ACC-1", vendorOK, "CARD-9", typ)
			if i%2 == 1 {
				body["vendor"] = vendorFlaky // a different task for the same reference
			}
			_, errs[i] = b.svc.CreateForAccount(context.Background(), raw(t, body), visible)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			continue
		}
		if p, ok := problem.As(err); !ok || p.Code != CodeAlreadyExists {
			t.Errorf("request %d: %v", i, err)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-9'`); n != 1 {
		t.Errorf("%d instructions stored, want 1", n)
	}
}

func TestCreateForAccount_EachProblemAtItsAttr(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	b.account(t, b.demo, "ACC-1", 0)
	b.staged(t, b.demo, "STAGED-1")
	b.account(t, b.other, "OTHER-ACC", 0)
	tests := []struct {
		name string
		edit func(m map[string]any)
		code string
		attr string
	}{
		{"unknown vendor", func(m map[string]any) { m["vendor"] = "NOBODY" }, CodeVendorNotFound, "vendor"},
		{"vendor names are case-sensitive", func(m map[string]any) { m["vendor"] = strings.ToLower(vendorOK) }, CodeVendorNotFound, "vendor"},
		{"type of 65 characters", func(m map[string]any) { m["type"] = strings.Repeat("C", 65) }, validate.CodeInvalidChoice, "type"},
		{"missing account", func(m map[string]any) { m["external_account_number"] = "NOPE" }, CodeAccountNotFound, "external_account_number"},
		{"staged but not imported", func(m map[string]any) { m["external_account_number"] = "STAGED-1" }, CodeAccountNotFound, "external_account_number"},
		{"another supplier's account", func(m map[string]any) { m["external_account_number"] = "OTHER-ACC" }, CodeAccountNotFound, "external_account_number"},
		{"unknown supplier", func(m map[string]any) { m["import_supplier"] = "NOPE" }, CodeSupplierNotFound, "import_supplier"},
		{"supplier the key may not see", func(m map[string]any) { m["import_supplier"] = "HIDDEN" }, CodeSupplierNotFound, "import_supplier"},
		{"blank reference", func(m map[string]any) { m["reference"] = " " }, validate.CodeBlank, "reference"},
		{"reference over the reference's 512", func(m map[string]any) { m["reference"] = strings.Repeat("r", 513) }, validate.CodeMaxLength, "reference"},
		{"reference missing", func(m map[string]any) { delete(m, "reference") }, validate.CodeRequired, "reference"},
		{"type a number", func(m map[string]any) { m["type"] = 1 }, validate.CodeInvalid, "type"},
		{"undocumented field", func(m map[string]any) { m["accounts"] = []any{} }, validate.CodeUnknownField, "accounts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := accountBody("ACC-1", vendorOK, "CARD-10", TypeCard)
			tc.edit(m)
			_, err := b.svc.CreateForAccount(context.Background(), raw(t, m), visible)
			p := asProblem(t, err)
			want := []problem.FieldError{{Code: tc.code, Attr: tc.attr}}
			if diff := cmp.Diff(want, p.Errors, ignoreDetail); diff != "" || p.Code != CodeFailedValidation || p.Kind != problem.Invalid {
				t.Errorf("code %s kind %v, errors (-want +got):\n%s", p.Code, p.Kind, diff)
			}
		})
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions`); n != 0 {
		t.Errorf("refused requests stored %d instructions", n)
	}
	if n := b.sims[vendorOK].Requests("CARD-10"); n != 0 {
		t.Errorf("refused requests asked the vendor %d times", n)
	}
}

var ignoreDetail = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Detail" }, cmp.Ignore())

func TestCreateForAccount_ReportsEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	m := map[string]any{"import_supplier": "DEMO", "external_account_number": "NOPE", "vendor": "NOBODY", "type": strings.Repeat("c", 65), "extra": true}
	_, err := b.svc.CreateForAccount(context.Background(), raw(t, m), visible)
	p := asProblem(t, err)
	var got []string
	for _, e := range p.Errors {
		got = append(got, e.Code+"@"+e.Attr)
	}
	slices.Sort(got)
	want := []string{
		CodeAccountNotFound + "@external_account_number",
		CodeVendorNotFound + "@vendor",
		validate.CodeInvalidChoice + "@type",
		validate.CodeRequired + "@reference",
		validate.CodeUnknownField + "@extra",
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestCreate_RefusesBodiesThatAreNotAJSONObject(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	for _, body := range []string{``, `{`, `[]`, `null`, `{"a":1} {}`} {
		t.Run(body, func(t *testing.T) {
			t.Parallel()
			_, err := b.svc.CreateForAccount(context.Background(), []byte(body), visible)
			if p := asProblem(t, err); p.Code != CodeParseError || p.Kind != problem.Invalid {
				t.Errorf("E9: %+v", p)
			}
			_, err = b.svc.CreateForBusiness(context.Background(), []byte(body), visible)
			if p := asProblem(t, err); p.Code != CodeParseError || p.Kind != problem.Invalid {
				t.Errorf("E2: %+v", p)
			}
		})
	}
}

// Without a worker, the request gives up after its wait, answers that the
// verification did not finish, and removes the task, so that it cannot
// store the instruction after the caller was told to retry.
func TestCreateForAccount_NoWorkerAnswersUnfinishedAndRemovesTheTask(t *testing.T) {
	t.Parallel()
	b := setup(t, false)
	b.account(t, b.demo, "ACC-1", 0)
	if _, err := b.db.Exec(`UPDATE payment_vendors SET timeout_ms = 10, attempts = 1 WHERE name = $1`, vendorOK); err != nil {
		t.Fatal(err)
	}
	b.svc = New(b.db, b.tasks, Config{TaskMargin: 100 * time.Millisecond, QueueWait: 50 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
	start := time.Now()
	_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody("ACC-1", vendorOK, "CARD-11", TypeCard)), visible)
	p := asProblem(t, err)
	if p.Kind != problem.RetryableUpstream || p.Code != CodeVerificationUnfinished {
		t.Fatalf("got %+v", p)
	}
	if d := time.Since(start); d < 160*time.Millisecond {
		t.Errorf("gave up after %v, before the task's own timeout and the queue wait passed", d)
	}
	q, err := asynq.NewInspectorFromRedisClient(b.rdb).GetQueueInfo(jobs.QueueVendors)
	if err != nil {
		t.Fatal(err)
	}
	if q.Size != 0 {
		t.Errorf("the abandoned task is still queued: %+v", q)
	}
}

func businessBody(ext string, ref string, accounts ...string) map[string]any {
	accs := []any{}
	for _, a := range accounts {
		accs = append(accs, map[string]any{"external_account_number": a})
	}
	return map[string]any{"import_supplier_code": "DEMO", "external_business_identifier": ext, "vendor": vendorOK,
		"reference": ref, "type": TypeCard, "accounts": accs}
}

func TestCreateForBusiness_StoresTheInstructionWithItsAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	c1 := b.business(t, b.demo, "BIZ-1", "Acme Ltd", "BC-1")
	b.account(t, b.demo, "B-ACC-1", c1)
	b.account(t, b.demo, "B-ACC-2", c1)
	res, err := b.svc.CreateForBusiness(ctx, raw(t, businessBody("BIZ-1", "CARD-20", "B-ACC-2", "B-ACC-1")), visible)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(BusinessResult{Reference: "CARD-20", ExternalBusinessIdentifier: "BIZ-1"}, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	var accounts []string
	if err := b.db.Select(&accounts, `SELECT a.external_account_number FROM payment_instructions pi
		JOIN businesses bz ON bz.id = pi.business_id
		JOIN payment_instruction_accounts pa ON pa.instruction_id = pi.id JOIN accounts a ON a.id = pa.account_id
		WHERE pi.reference = 'CARD-20' AND bz.external_business_identifier = 'BIZ-1' AND pi.account_id IS NULL ORDER BY pa.position`); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"B-ACC-2", "B-ACC-1"}, accounts); diff != "" {
		t.Errorf("accounts of the instruction (-want +got):\n%s", diff)
	}

	_, err = b.svc.CreateForBusiness(ctx, raw(t, businessBody("BIZ-1", "CARD-20", "B-ACC-1")), visible)
	p := asProblem(t, err)
	if p.Code != CodeAlreadyExists || p.Extra["external_business_identifier"] != "BIZ-1" || p.Extra["reference"] != "CARD-20" {
		t.Errorf("repeat: %+v", p)
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-20'`); n != 1 {
		t.Errorf("%d instructions stored, want 1", n)
	}
}

// Businesses that share an external identifier (with other names) are told
// apart by the accounts' contracts.
func TestCreateForBusiness_SharedIdentifierIsResolvedByTheAccounts(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	c1 := b.business(t, b.demo, "BIZ-1", "Acme Ltd", "BC-1")
	c2 := b.business(t, b.demo, "BIZ-1", "Acme (North) Ltd", "BC-2")
	b.account(t, b.demo, "N-ACC-1", c2)
	b.account(t, b.demo, "S-ACC-1", c1)
	if _, err := b.svc.CreateForBusiness(context.Background(), raw(t, businessBody("BIZ-1", "CARD-21", "N-ACC-1")), visible); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions pi JOIN business_contracts c ON c.business_id = pi.business_id
		WHERE c.id = $1`, c2); n != 1 {
		t.Errorf("the instruction is not the northern business's")
	}
	_, err := b.svc.CreateForBusiness(context.Background(), raw(t, businessBody("BIZ-1", "CARD-22", "N-ACC-1", "S-ACC-1")), visible)
	p := asProblem(t, err)
	want := []problem.FieldError{{Code: CodeAccountNotInBusiness, Attr: "accounts.1.external_account_number"}}
	if diff := cmp.Diff(want, p.Errors, ignoreDetail); diff != "" {
		t.Errorf("accounts of two businesses (-want +got):\n%s", diff)
	}
}

func TestCreateForBusiness_EachProblemAtItsAttr(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	c1 := b.business(t, b.demo, "BIZ-1", "Acme Ltd", "BC-1")
	c2 := b.business(t, b.demo, "BIZ-2", "Other Ltd", "BC-2")
	b.account(t, b.demo, "B-ACC-1", c1)
	b.account(t, b.demo, "B-ACC-OTHER", c2)
	b.account(t, b.demo, "PLAIN-ACC", 0)
	b.staged(t, b.demo, "STAGED-1")
	tests := []struct {
		name string
		edit func(m map[string]any)
		code string
		attr string
	}{
		{"account of another business", func(m map[string]any) { m["accounts"] = accs("B-ACC-1", "B-ACC-OTHER") },
			CodeAccountNotInBusiness, "accounts.1.external_account_number"},
		{"account of no business", func(m map[string]any) { m["accounts"] = accs("PLAIN-ACC") }, CodeAccountNotInBusiness, "accounts.0.external_account_number"},
		{"account not imported", func(m map[string]any) { m["accounts"] = accs("B-ACC-1", "STAGED-1") }, CodeAccountNotFound, "accounts.1.external_account_number"},
		{"account unknown", func(m map[string]any) { m["accounts"] = accs("NOPE") }, CodeAccountNotFound, "accounts.0.external_account_number"},
		{"account listed twice", func(m map[string]any) { m["accounts"] = accs("B-ACC-1", "B-ACC-1") }, CodeDuplicateAccount, "accounts.1.external_account_number"},
		{"no accounts", func(m map[string]any) { m["accounts"] = []any{} }, validate.CodeRequired, "accounts"},
		{"accounts missing", func(m map[string]any) { delete(m, "accounts") }, validate.CodeRequired, "accounts"},
		{"account without number", func(m map[string]any) { m["accounts"] = []any{map[string]any{}} }, validate.CodeRequired, "accounts.0.external_account_number"},
		{"unknown vendor", func(m map[string]any) { m["vendor"] = "NOBODY" }, CodeVendorNotFound, "vendor"},
		{"type of 65 characters", func(m map[string]any) { m["type"] = strings.Repeat("C", 65) }, validate.CodeInvalidChoice, "type"},
		{"unknown supplier", func(m map[string]any) { m["import_supplier_code"] = "NOPE" }, CodeSupplierNotFound, "import_supplier_code"},
		{"supplier the key may not see", func(m map[string]any) { m["import_supplier_code"] = "HIDDEN" }, CodeSupplierNotFound, "import_supplier_code"},
		{"E9's supplier field", func(m map[string]any) { m["import_supplier"] = "DEMO" }, validate.CodeUnknownField, "import_supplier"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := businessBody("BIZ-1", "CARD-30", "B-ACC-1")
			tc.edit(m)
			_, err := b.svc.CreateForBusiness(context.Background(), raw(t, m), visible)
			p := asProblem(t, err)
			want := []problem.FieldError{{Code: tc.code, Attr: tc.attr}}
			if diff := cmp.Diff(want, p.Errors, ignoreDetail); diff != "" || p.Code != CodeFailedValidation {
				t.Errorf("code %s, errors (-want +got):\n%s", p.Code, diff)
			}
		})
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions`); n != 0 {
		t.Errorf("refused requests stored %d instructions", n)
	}
}

// A business the supplier does not have is not found (404), as the
// reference's E2 answers, whatever else the request holds: its accounts and
// vendor have nothing to be checked against.
func TestCreateForBusiness_UnknownBusinessIsNotFound(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	c1 := b.business(t, b.demo, "BIZ-1", "Acme Ltd", "BC-1")
	b.account(t, b.demo, "B-ACC-1", c1)
	for _, tc := range []struct {
		name string
		edit func(m map[string]any)
	}{
		{"alone", func(map[string]any) {}},
		{"with an unknown account and vendor", func(m map[string]any) { m["accounts"] = accs("NOPE"); m["vendor"] = "NOBODY" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := businessBody("BIZ-NOPE", "CARD-30", "B-ACC-1")
			tc.edit(m)
			_, err := b.svc.CreateForBusiness(context.Background(), raw(t, m), visible)
			p := asProblem(t, err)
			type answer struct {
				Kind   problem.Kind
				Code   string
				Errors []problem.FieldError
			}
			want := answer{problem.NotFound, CodeBusinessNotFound, []problem.FieldError{{Code: CodeBusinessNotFound, Attr: "external_business_identifier"}}}
			if diff := cmp.Diff(want, answer{p.Kind, p.Code, p.Errors}, ignoreDetail); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCreateForBusiness_VendorFailuresAreAnsweredAsForAnAccount(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	c1 := b.business(t, b.demo, "BIZ-1", "Acme Ltd", "BC-1")
	b.account(t, b.demo, "B-ACC-1", c1)
	tests := []struct {
		vendor, ref string
		kind        problem.Kind
		code        string
	}{
		{vendorOK, "NO-SUCH-REF", problem.Invalid, CodeNotFoundAtVendor},
		{vendorDown, "CARD-40", problem.RetryableUpstream, CodeVendorUnavailable},
		{vendorSlow, "CARD-41", problem.RetryableUpstream, CodeVendorUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.vendor, func(t *testing.T) {
			t.Parallel()
			m := businessBody("BIZ-1", tc.ref, "B-ACC-1")
			m["vendor"] = tc.vendor
			_, err := b.svc.CreateForBusiness(context.Background(), raw(t, m), visible)
			if p := asProblem(t, err); p.Kind != tc.kind || p.Code != tc.code {
				t.Errorf("got %v %s, want %v %s", p.Kind, p.Code, tc.kind, tc.code)
			}
		})
	}
	t.Run("flaky vendor succeeds", func(t *testing.T) {
		t.Parallel()
		m := businessBody("BIZ-1", "CARD-42", "B-ACC-1")
		m["vendor"] = vendorFlaky
		if _, err := b.svc.CreateForBusiness(context.Background(), raw(t, m), visible); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOutcome_KindsBecomeTheCallersAnswer(t *testing.T) {
	t.Parallel()
	rec := problem.Record{Code: "c", Detail: "d", Errors: []problem.FieldError{}}
	tests := []struct {
		kind string
		want problem.Kind
	}{
		{kindInvalid, problem.Invalid},
		{kindRetryable, problem.RetryableUpstream},
		{kindInternal, problem.Internal},
		{"from a newer worker", problem.Internal},
	}
	for _, tc := range tests {
		b, _ := json.Marshal(outcome{Kind: tc.kind, Error: &rec})
		var o outcome
		if err := json.Unmarshal(b, &o); err != nil {
			t.Fatal(err)
		}
		if p := asProblem(t, o.err()); p.Kind != tc.want {
			t.Errorf("%s: kind %v, want %v", tc.kind, p.Kind, tc.want)
		}
	}
	if (outcome{}).err() != nil {
		t.Error("an outcome without error is a failure")
	}
}

func accs(numbers ...string) []any {
	out := []any{}
	for _, n := range numbers {
		out = append(out, map[string]any{"external_account_number": n})
	}
	return out
}

// "Retry as is" works: the failed task of the first request is archived
// under the same id, and the retry replaces it instead of joining it.
func TestCreateForAccount_RetryAsIsRunsANewVerification(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	tests := []struct {
		vendor, ref, code string
	}{
		{vendorDown, "CARD-50", CodeVendorUnavailable},
		{vendorOK, "NO-SUCH-REF-2", CodeNotFoundAtVendor},
	}
	for i, tc := range tests {
		t.Run(tc.vendor, func(t *testing.T) {
			t.Parallel()
			ext := fmt.Sprintf("RETRY-%d", i)
			b.account(t, b.demo, ext, 0)
			for try := 1; try <= 2; try++ {
				_, err := b.svc.CreateForAccount(context.Background(), raw(t, accountBody(ext, tc.vendor, tc.ref, TypeCard)), visible)
				if p := asProblem(t, err); p.Code != tc.code {
					t.Fatalf("try %d: %+v", try, p)
				}
				if try == 1 {
					// The failed task announces its outcome just before
					// Asynq archives it; a retry in between joins it and
					// hears that outcome, without asking the vendor again.
					// Retry once it is archived, as this test is about.
					waitArchived(t, b, tc.ref)
				}
			}
			per := map[string]int{vendorDown: testAttempts, vendorOK: 1}[tc.vendor]
			if n := b.sims[tc.vendor].Requests(tc.ref); n != 2*per {
				t.Errorf("the vendor was asked %d times over two tries, want %d", n, 2*per)
			}
		})
	}
}

// A verification that finds its own instruction stored (same owner,
// reference, vendor and type: a takeover stored it while this task's worker
// was thought dead) ends as done, without asking the vendor, so that Asynq
// does not archive it as a failure; one that finds an instruction of
// another vendor or type under the reference is refused as a duplicate.
func TestVerifierRun_InstructionStoredByAnotherRunOfTheSameVerificationIsDone(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	b.account(t, b.demo, "ACC-1", 0)
	if _, err := b.svc.CreateForAccount(ctx, raw(t, accountBody("ACC-1", vendorOK, "CARD-9", TypeCard)), visible); err != nil {
		t.Fatal(err)
	}
	var row struct {
		Supplier int64  `db:"supplier_id"`
		Vendor   int64  `db:"vendor_id"`
		Account  int64  `db:"account_id"`
		Type     string `db:"type"`
	}
	if err := b.db.Get(&row, `SELECT supplier_id, vendor_id, account_id, type FROM payment_instructions WHERE reference = 'CARD-9'`); err != nil {
		t.Fatal(err)
	}
	p := jobs.PaymentInstructionVerifyPayload{SupplierID: row.Supplier, VendorID: row.Vendor, Reference: "CARD-9", Type: row.Type, AccountID: row.Account}
	verifier := NewVerifier(b.db, b.rdb, slog.New(slog.DiscardHandler))
	asked := b.sims[vendorOK].Requests("CARD-9")
	if err := verifier.Run(ctx, p); err != nil {
		t.Errorf("a second run of the same verification: %v, want done", err)
	}
	if n := b.sims[vendorOK].Requests("CARD-9"); n != asked {
		t.Errorf("the vendor was asked again (%d, was %d)", n, asked)
	}
	other := p
	other.Type = TypeDirectDebit
	err := verifier.Run(ctx, other)
	var refused *jobs.Refused
	if !errors.As(err, &refused) || refused.Code != CodeAlreadyExists {
		t.Errorf("a verification of another type under the stored reference: %v, want refused %s", err, CodeAlreadyExists)
	}
	if n := b.count(t, `SELECT count(*) FROM payment_instructions WHERE reference = 'CARD-9'`); n != 1 {
		t.Errorf("%d instructions stored, want 1", n)
	}
}

// waitArchived waits until a verification task of reference is archived.
func waitArchived(t *testing.T, b *bundle, reference string) {
	t.Helper()
	insp := asynq.NewInspectorFromRedisClient(b.rdb)
	deadline := time.Now().Add(30 * time.Second)
	for {
		tasks, err := insp.ListArchivedTasks(jobs.QueueVendors)
		if err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
			t.Fatal(err)
		}
		for _, task := range tasks {
			var p jobs.PaymentInstructionVerifyPayload
			if json.Unmarshal(task.Payload, &p) == nil && p.Reference == reference {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the failed verification of %s was not archived within 30 s", reference)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A verification that fails for an infrastructure reason (PostgreSQL out of
// reach, as in a restart) leaves its task to Asynq's retry, which stores
// the instruction or finds it stored by the caller's own retry; a refusal
// skips the retry and is archived with its reason.
func TestVerifierRun_InfrastructureFailureIsLeftToAsynqsRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, true)
	ctx := context.Background()
	b.account(t, b.demo, "ACC-INFRA", 0)
	var row struct {
		Supplier int64 `db:"supplier_id"`
		Account  int64 `db:"account_id"`
		Vendor   int64 `db:"vendor_id"`
	}
	if err := b.db.Get(&row, `SELECT a.supplier_id, a.id AS account_id, v.id AS vendor_id FROM accounts a, payment_vendors v
		WHERE a.external_account_number = 'ACC-INFRA' AND v.name = $1`, vendorOK); err != nil {
		t.Fatal(err)
	}
	p := jobs.PaymentInstructionVerifyPayload{SupplierID: row.Supplier, AccountID: row.Account, VendorID: row.Vendor,
		Reference: "NO-SUCH-REF-INFRA", Type: TypeCard}
	err := NewVerifier(b.db, b.rdb, slog.New(slog.DiscardHandler)).Run(ctx, p)
	var refused *jobs.Refused
	if !errors.As(err, &refused) || !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("a reference the vendor does not know: %v, want refused, skipping Asynq's retry", err)
	}
	unreachable, err := sqlx.Open("postgres", "postgres://importd@127.0.0.1:1/none?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unreachable.Close() })
	p.Reference = "CARD-INFRA"
	err = NewVerifier(db.New(unreachable), b.rdb, slog.New(slog.DiscardHandler)).Run(ctx, p)
	if err == nil || errors.Is(err, asynq.SkipRetry) || errors.As(err, &refused) {
		t.Errorf("PostgreSQL out of reach: %v, want an error left to Asynq's retry", err)
	}
}
