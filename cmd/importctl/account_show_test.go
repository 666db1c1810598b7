package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/accountview"
	"github.com/bulkimport/bulkimport/jobs/business"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/payment"
	"github.com/bulkimport/bulkimport/jobs/payment/vendorsim"
	"github.com/bulkimport/bulkimport/jobs/postimport"
)

var updateShowGolden = flag.Bool("update", false, "rewrite the golden files of importctl account show")

// everyone lets every supplier through the services' visibility checks.
func everyone(string) bool { return true }

// showAccount is an account taken through the real paths: E1 for its
// business, E4 and E5 (the worker's creation) for the account of
// jobs/account/testdata/account.json, E8, E7 and E6 onto it, and the
// worker's verification, at the vendor simulator, of an E9 instruction and
// of an E2 instruction of its business that names it.
type showAccount struct {
	c      *ctl
	db     *db.DB
	number string // the service account number E5 drew
	start  time.Time
}

func newShowAccount(t *testing.T) *showAccount {
	t.Helper()
	s := &showAccount{c: newCtl(t), start: time.Now().UTC().Truncate(time.Second)}
	s.db = s.c.db()
	s.c.ok("supplier", "create", "DEMO")
	s.c.ok("team", "create", "Ops")
	s.c.ok("product", "create", "ELEC", "--tariff", "E-1R-VAR-C", "--tariff", "E-1R-FIX-24M-C")
	s.c.ok("product", "create", "HEAT", "--tariff", "WH-RENT-STD", "--tariff", "HP-STD")
	ctx := context.Background()
	if _, err := business.New(s.db, time.Now).Create(ctx, []byte(`{"import_supplier_code": "DEMO",
		"external_business_identifier": "BIZ-DEMO", "business": {"business_type": "LTD", "company_number": "00001",
		"company_name": "Demo Ltd", "business_contracts": [{"identifier": "BC-2024-0042", "valid_from_date": "2024-01-01",
		"signed_at_date": "2023-12-15", "versions": [{"applicable_at_date": "2024-01-01", "terms": []}]}]}}`), everyone); err != nil {
		t.Fatalf("E1: %v", err)
	}
	payload, err := os.ReadFile("../../jobs/account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := imports.New(s.db).Stage(ctx, payload, everyone); err != nil {
		t.Fatalf("E4: %v", err)
	}
	p := jobs.AccountProcessPayload{SupplierCode: "DEMO", ExternalAccountNumber: "A-00012345"}
	if err := s.db.QueryRow(`SELECT p.id, p.supplier_id, (SELECT id FROM operations_teams) FROM import_processes p`).
		Scan(&p.ProcessID, &p.SupplierID, &p.OperationsTeamID); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	if err := creation.NewCreator(s.db, rdb, account.NewCatalog(s.db, nil), nil, creation.NewAnnouncer(rdb, log), log).Run(ctx, p, true); err != nil {
		t.Fatalf("E5: %v", err)
	}
	if err := s.db.Get(&s.number, `SELECT service_account_number FROM accounts`); err != nil {
		t.Fatal(err)
	}

	post := postimport.New(s.db, nil)
	if _, err := post.CreateStatements(ctx, []byte(`{"import_supplier": "DEMO", "external_account_number": "A-00012345",
		"statements": [{"statement_id": "S-2025-04", "number": "0001", "bill_period_from_date": "2025-04-01",
			"bill_period_to_date": "2025-04-30", "issued_date": "2025-05-02", "gross_amount": 4567,
			"statement_path": "statements/S-2025-04.pdf"},
		{"statement_id": "S-2025-05", "bill_period_from_date": "2025-05-01", "bill_period_to_date": "2025-05-31"}]}`), everyone); err != nil {
		t.Fatalf("E8: %v", err)
	}
	// One of each type, a reversal among them: the balance is
	// 120.50 + 31.50 - 45.25 - 10.00 + 5.00 - 0.75 = 101.00.
	if _, err := post.CreateTransactions(ctx, []byte(`{"import_supplier": "DEMO", "external_account_number": "A-00012345",
		"transactions": [
		{"transaction_id": "T-1", "transaction_date": "2025-06-02", "amount": 120.50, "type": "CHARGE",
			"reason": "IMPORTED_CHARGE", "display_note": "Imported charge", "note": "line 1\nline 2"},
		{"transaction_id": "T-2", "transaction_date": "2025-06-03", "amount": 31.5, "type": "SUPPLY_CHARGE",
			"product_code": "ELEC", "display_note": "Electricity",
			"line_items": [{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
				"number_of_units": 123.456, "net_amount": 30.00, "price_per_unit": 0.243012, "units": [100.5, 22.956]}],
			"tax_items": [{"amount": 1.50, "tax_type": "VAT", "value_taxed": 30.00, "rate": 0.05, "unit_type": "PROPORTION"}]},
		{"transaction_id": "T-3", "transaction_date": "2025-06-04", "amount": 45.25, "type": "PAYMENT",
			"reason": "ACCOUNT_CHARGE_PAYMENT", "reference": "PAY-3", "payment_type": "DD_REGULAR_COLLECTION"},
		{"transaction_id": "T-4", "transaction_date": "2025-06-05", "amount": 10, "type": "CREDIT", "reason": "GOODWILL"},
		{"transaction_id": "T-5", "transaction_date": "2025-06-06", "amount": 5.00, "type": "REPAYMENT",
			"reason": "BALANCE_REFUND", "reference": "REF-5", "payment_type": "BANK_TRANSFER"},
		{"transaction_id": "T-6", "transaction_date": "2025-06-06", "amount": -0.75, "type": "CHARGE",
			"reason": "IMPORTED_CHARGE", "display_note": "Reversal"}]}`), url.Values{}, everyone); err != nil {
		t.Fatalf("E7: %v", err)
	}
	if _, err := post.CreateNotes(ctx, []byte(`{"import_supplier": "DEMO", "external_account_number": "A-00012345",
		"notes": [{"body": "Moved from the legacy CRM <Siebel> & checked.", "created_at": "2025-06-01T09:00:00Z", "is_pinned": true}]}`), everyone); err != nil {
		t.Fatalf("E6: %v", err)
	}

	sim, err := vendorsim.New(vendorsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	s.c.ok("vendor", "add", "DEMO_PAY", "--url", srv.URL)
	pi := jobs.PaymentInstructionVerifyPayload{Reference: "DEMO-CARD-0001", Type: payment.TypeCard}
	if err := s.db.QueryRow(`SELECT a.supplier_id, a.id, (SELECT id FROM payment_vendors) FROM accounts a`).
		Scan(&pi.SupplierID, &pi.AccountID, &pi.VendorID); err != nil {
		t.Fatal(err)
	}
	verifier := payment.NewVerifier(s.db, rdb, log)
	if err := verifier.Run(ctx, pi); err != nil {
		t.Fatalf("E9: %v", err)
	}
	// E2: the business's direct debit, naming the account.
	bi := jobs.PaymentInstructionVerifyPayload{SupplierID: pi.SupplierID, VendorID: pi.VendorID, Reference: "DEMO-DD-0001",
		Type: payment.TypeDirectDebit, AccountIDs: []int64{pi.AccountID}}
	if err := s.db.Get(&bi.BusinessID, `SELECT id FROM businesses`); err != nil {
		t.Fatal(err)
	}
	if err := verifier.Run(ctx, bi); err != nil {
		t.Fatalf("E2: %v", err)
	}
	return s
}

// stamps are RFC 3339 times as account show writes them.
var stamps = regexp.MustCompile(`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z`)

// nowStamp stands for a time of the test's run: as wide as the table's
// times (to the second), so that the columns stay as they were.
const nowStamp = "<now>..............."

// normalise replaces what differs between runs, the service account number
// and the times of this run, with placeholders of the same width.
func (s *showAccount) normalise(t *testing.T, out string) string {
	t.Helper()
	out = strings.ReplaceAll(out, s.number, "A-SERVICE#")
	end := time.Now().UTC().Add(time.Second)
	return stamps.ReplaceAllStringFunc(out, func(m string) string {
		at, err := time.Parse(time.RFC3339Nano, m)
		if err != nil {
			t.Fatalf("time %q: %v", m, err)
		}
		if at.Before(s.start) {
			return m // a time of the payload
		}
		if at.After(end) {
			t.Errorf("time %s is after the test ran", m)
		}
		return nowStamp
	})
}

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name, got string) string {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateShowGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to write it)", err, t.Name())
	}
	return string(want)
}

// decode decodes a JSON document with its numbers as written.
func decode(t *testing.T, doc string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, doc)
	}
	return v
}

// The whole account, as E1, E2, E4, E5, E6, E7, E8 and E9 wrote it, reads back
// as one JSON document with the same content as the table.
func TestAccountShow_PrintsTheWholeImportedAccount(t *testing.T) {
	t.Parallel()
	s := newShowAccount(t)

	jsonOut := s.normalise(t, s.c.ok("account", "show", "DEMO", "A-00012345", "--json"))
	if !strings.Contains(jsonOut, `"Moved from the legacy CRM <Siebel> & checked."`) {
		t.Error("--json escapes the note's < and &; an operator reads them as written")
	}
	if diff := cmp.Diff(decode(t, golden(t, "account_show.json", jsonOut)), decode(t, jsonOut)); diff != "" {
		t.Errorf("account show --json (-golden +got):\n%s", diff)
	}
	table := s.normalise(t, s.c.ok("account", "show", "DEMO", "A-00012345"))
	if diff := cmp.Diff(golden(t, "account_show.txt", table), table); diff != "" {
		t.Errorf("account show (-golden +got):\n%s", diff)
	}

	// What an operator checks first, stated here rather than only in the
	// golden files: the money is exact, and the balance is E7's.
	var v accountview.View
	if err := json.Unmarshal([]byte(s.c.ok("account", "show", "DEMO", "A-00012345", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	if v.Account == nil {
		t.Fatal("account: null for a created account")
	}
	type money struct{ ID, Amount string }
	var got []money
	for _, tx := range v.Account.Transactions {
		got = append(got, money{tx.TransactionID, tx.Amount.String()})
	}
	want := []money{{"T-1", "120.50"}, {"T-2", "31.50"}, {"T-3", "45.25"}, {"T-4", "10.00"}, {"T-5", "5.00"}, {"T-6", "-0.75"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transaction amounts (-want +got):\n%s", diff)
	}
	l := v.Account.Ledger
	if l.Balance.String() != "101.00" || l.FromTransactions.String() != "101.00" || l.Currency != "GBP" {
		t.Errorf("ledger = %s %s (from transactions %s), want GBP 101.00 for both", l.Currency, l.Balance, l.FromTransactions)
	}
	var stored string
	if err := s.db.Get(&stored, `SELECT balance::text FROM ledgers`); err != nil || stored != l.Balance.String() {
		t.Errorf("ledgers.balance = %q (%v), shown %s", stored, err, l.Balance)
	}
	if v.Process.Status != "COMPLETED" || v.Process.ServiceAccountNumber == nil || *v.Process.ServiceAccountNumber != s.number ||
		v.Account.ServiceAccountNumber != s.number {
		t.Errorf("process %+v, account number %s, want COMPLETED with %s", v.Process, v.Account.ServiceAccountNumber, s.number)
	}
}

// A ledger changed outside E7 shows both sums and says they differ.
func TestAccountShow_LedgerThatIsNotTheSumOfItsTransactionsIsFlagged(t *testing.T) {
	t.Parallel()
	s := newShowAccount(t)
	if _, err := s.db.Exec(`UPDATE ledgers SET balance = balance + 1`); err != nil {
		t.Fatal(err)
	}
	var v accountview.View
	if err := json.Unmarshal([]byte(s.c.ok("account", "show", "DEMO", "A-00012345", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	got := []string{v.Account.Ledger.Balance.String(), v.Account.Ledger.FromTransactions.String()}
	if diff := cmp.Diff([]string{"102.00", "101.00"}, got); diff != "" {
		t.Errorf("balance, balance_from_transactions (-want +got):\n%s", diff)
	}
	if table := s.c.ok("account", "show", "DEMO", "A-00012345"); !strings.Contains(table, "WARNING: the stored balance is not the sum") {
		t.Errorf("table does not flag the ledger:\n%s", table)
	}
}

// An unknown supplier or number fails with a one-line message; an account
// staged but not created shows its process and says it does not exist yet,
// with the last error of a failed processing.
func TestAccountShow_UnknownOrNotYetCreatedAccounts(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	d := c.db()
	stage, create := referenceAccount(t, c, d)
	stage("STAGED-1")
	c.ok("account", "skip", "TENTACLE_ENERGY", "STAGED-1")
	stage("FAILED-1")
	// The tariff of the TREATED supply point leaves the catalogue between
	// E4 and E5: E5 refuses the account and records why.
	if _, err := d.Exec(`DELETE FROM tariffs WHERE code = 'WATER_PRODUCT'`); err != nil {
		t.Fatal(err)
	}
	if err := create("FAILED-1"); err == nil {
		t.Fatal("E5 created an account whose tariff is gone")
	}

	for _, tc := range []struct {
		name, want string
		args       []string
	}{
		{"unknown supplier", "Import supplier NOPE does not exist.", []string{"NOPE", "A-1"}},
		{"unknown number", "No account A-404 of supplier TENTACLE_ENERGY was staged (E4).", []string{"TENTACLE_ENERGY", "A-404"}},
		{"unknown supplier with --json", "Import supplier NOPE does not exist.", []string{"NOPE", "A-1", "--json"}},
		{"no number", "accepts 2 arg(s)", []string{"TENTACLE_ENERGY"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, out, errs := c.run(append([]string{"account", "show"}, tc.args...)...)
			if code != 1 || out != "" || !strings.HasPrefix(errs, "importctl: ") || !strings.Contains(errs, tc.want) ||
				strings.Count(errs, "\n") != 1 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1, no output, one line with %q", code, out, errs, tc.want)
			}
		})
	}

	for _, tc := range []struct {
		name, number string
		want         map[string]any
		lines        []string
	}{
		{name: "staged and skipped", number: "STAGED-1",
			want:  map[string]any{"status": "UNKNOWN", "last_error": nil, "skipped": true, "service_account_number": nil},
			lines: []string{"Marked to be skipped     yes", "Last error               -"}},
		{name: "failed", number: "FAILED-1",
			want: map[string]any{"status": "UNKNOWN", "skipped": false, "service_account_number": nil,
				"last_error": map[string]any{"detail": "Could not validate account data.", "code": "account_failed_validation",
					"errors": []any{map[string]any{"detail": `Tariff "WATER_PRODUCT" not found.`, "code": "tariff_code_not_found",
						"attr": "supply_addresses.0.supply_points.1.agreements.0.tariff_code"}}}},
			lines: []string{"Last error               account_failed_validation: Could not validate account data.",
				`                         supply_addresses.0.supply_points.1.agreements.0.tariff_code: tariff_code_not_found: Tariff "WATER_PRODUCT" not found.`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var doc map[string]any
			if err := json.Unmarshal([]byte(c.ok("account", "show", "TENTACLE_ENERGY", tc.number, "--json")), &doc); err != nil {
				t.Fatal(err)
			}
			proc := doc["import_process"].(map[string]any)
			for _, k := range []string{"staged_at", "updated_at", "account_created_at"} {
				delete(proc, k)
			}
			if diff := cmp.Diff(tc.want, proc); diff != "" {
				t.Errorf("import_process (-want +got):\n%s", diff)
			}
			if acc, ok := doc["account"]; !ok || acc != nil {
				t.Errorf("account = %v, want null", acc)
			}
			table := c.ok("account", "show", "TENTACLE_ENERGY", tc.number)
			for _, l := range append(tc.lines, "Status                   UNKNOWN",
				"The account does not exist yet: its import process is UNKNOWN; E5 creates it.") {
				if !bytes.Contains([]byte(table), []byte(l+"\n")) {
					t.Errorf("table lacks the line %q:\n%s", l, table)
				}
			}
		})
	}
}

// referenceAccount sets up supplier TENTACLE_ENERGY with the catalogue of
// the reference's example account, and returns a stager and a creator of
// that account under any external account number: E4, and the worker's E5
// (which returns the task's error).
func referenceAccount(t *testing.T, c *ctl, d *db.DB) (stage func(number string), create func(number string) error) {
	t.Helper()
	c.ok("supplier", "create", "TENTACLE_ENERGY", "--country", "US")
	c.ok("team", "create", "Ops")
	c.ok("product", "create", "P", "--tariff", "ELEC-1234-J", "--tariff", "WATER_PRODUCT")
	c.ok("supply-type", "add", "TREATED") // the reference's water supply point
	raw, err := os.ReadFile("../../jobs/account/testdata/reference_account.json")
	if err != nil {
		t.Fatal(err)
	}
	payload := decode(t, string(raw)).(map[string]any) // numbers as written: 2.0 stays 2.0
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	log := slog.New(slog.DiscardHandler)
	creator := creation.NewCreator(d, rdb, account.NewCatalog(d, nil), nil, creation.NewAnnouncer(rdb, log), log)
	stage = func(number string) {
		t.Helper()
		payload["external_account_number"] = number
		b, err := json.Marshal(payload)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := imports.New(d).Stage(context.Background(), b, everyone); err != nil {
			t.Fatalf("E4 of %s: %v", number, err)
		}
	}
	create = func(number string) error {
		t.Helper()
		p := jobs.AccountProcessPayload{SupplierCode: "TENTACLE_ENERGY", ExternalAccountNumber: number}
		if err := d.QueryRow(`SELECT p.id, p.supplier_id, (SELECT id FROM operations_teams) FROM import_processes p
			WHERE p.external_account_number = $1`, number).Scan(&p.ProcessID, &p.SupplierID, &p.OperationsTeamID); err != nil {
			t.Fatal(err)
		}
		return creator.Run(context.Background(), p, true)
	}
	return stage, create
}

// A supply type without a table of its own shows its fields as sent, the
// reference's example with a TREATED supply point among them.
func TestAccountShow_OtherSupplyTypesShowTheirFieldsAsSent(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	stage, create := referenceAccount(t, c, c.db())
	stage("8888888889")
	if err := create("8888888889"); err != nil {
		t.Fatalf("E5: %v", err)
	}

	doc := decode(t, c.ok("account", "show", "TENTACLE_ENERGY", "8888888889", "--json")).(map[string]any)
	acc := doc["account"].(map[string]any)
	points := acc["supply_addresses"].([]any)[0].(map[string]any)["supply_points"].([]any)
	got := map[string]any{}
	for _, sp := range points {
		sp := sp.(map[string]any)
		got[sp["supply_type"].(string)] = sp["fields"]
	}
	want := map[string]any{
		"ELECTRICITY": map[string]any{"identifier": "1200060176720", "energization_status": "ENERGIZED"},
		"TREATED": map[string]any{"identifier": "WATER:1234567890", "multiplier": json.Number("2.0"),
			"access_details": "Customer reports no access issues", "hazard_details": []any{"Dog"}, "supply_end_date": nil,
			"meters": []any{map[string]any{"meter_serial_number": "12KD", "installed_on": "2001-01-01",
				"registers": []any{map[string]any{"register_id": "1"}}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("supply point fields (-want +got):\n%s", diff)
	}
	if acc["business"] != nil || len(acc["transactions"].([]any)) != 0 || len(acc["payment_instructions"].([]any)) != 0 {
		t.Errorf("business %v, transactions %v, payment instructions %v: want null and empty lists",
			acc["business"], acc["transactions"], acc["payment_instructions"])
	}
	table := c.ok("account", "show", "TENTACLE_ENERGY", "8888888889")
	lines := map[string]bool{}
	for l := range strings.SplitSeq(table, "\n") {
		lines[strings.Join(strings.Fields(l), " ")] = true
	}
	for _, l := range []string{"Supply point 1.2 TREATED", `hazard_details ["Dog"]`, "multiplier 2.0", "supply_end_date null",
		"TRANSACTIONS (0)", "Balance 0.00 (what the customer owes; negative: in credit)"} {
		if !lines[l] {
			t.Errorf("table lacks the line %q (spaces squeezed):\n%s", l, table)
		}
	}
}
