package cohort

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/admin"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// validator is jobs/account's validator over a fresh database holding what
// generated accounts refer to, with today fixed after their dates.
func validator(t *testing.T) account.Validator {
	t.Helper()
	d := dbtest.New(t)
	seedCatalogue(t, d)
	return account.Validator{Catalog: account.NewCatalog(d, func(string) bool { return true }),
		Now: func() time.Time { return time.Date(2026, 1, 15, 12, 0, 0, 0, time.UTC) }}
}

func seedCatalogue(t *testing.T, d *db.DB) {
	t.Helper()
	ctx := context.Background()
	sup, err := admin.CreateSupplier(ctx, d, admin.Supplier{Code: "DEMO"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProduct(ctx, d, "DEMO-PRODUCTS", Tariffs); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Exec(`WITH b AS (INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
		VALUES ($1, 'BIZ-1', 'LTD', '01234567', 'Hughes Ltd') RETURNING id)
		INSERT INTO business_contracts (business_id, supplier_id, identifier) SELECT id, $1, 'BC-2024-0042' FROM b`, sup.ID); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, r io.Reader) ([]Record, []error) {
	t.Helper()
	cr, err := NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	var recs []Record
	var bad []error
	for {
		rec, err := cr.Next()
		if err == io.EOF {
			return recs, bad
		}
		var le *LineError
		if errors.As(err, &le) {
			bad = append(bad, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
}

// Every generated account that is meant to be valid passes the service's
// own validation, and every invalid one fails with exactly the code and
// attr the generator announces.
func TestGenerate_AccountsAreValidOrFailWithTheAnnouncedProblem(t *testing.T) {
	t.Parallel()
	v := validator(t)
	var buf bytes.Buffer
	const n = 150
	want, err := Generate(&buf, Options{Accounts: n, Seed: 7, InvalidRate: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 15 {
		t.Fatalf("%d invalid accounts at rate 0.1 of %d, want 15", len(want), n)
	}
	kinds := map[string]bool{}
	for _, e := range want {
		kinds[e.Kind] = true
	}
	if len(kinds) != len(InvalidKinds) {
		t.Errorf("invalid kinds used: %v, want all %d", kinds, len(InvalidKinds))
	}
	recs, bad := readAll(t, &buf)
	if len(bad) > 0 || len(recs) != n {
		t.Fatalf("read %d records and %v, want %d records", len(recs), bad, n)
	}
	var got []Expected
	for _, r := range recs {
		_, err := v.Validate(context.Background(), r.Account)
		if err == nil {
			continue
		}
		p, ok := problem.As(err)
		if !ok || p.Code != account.CodeFailedValidation {
			t.Fatalf("line %d: %v", r.Number, err)
		}
		for _, fe := range p.Errors {
			got = append(got, Expected{Line: r.Number, ExternalAccountNumber: r.ExternalAccountNumber, Code: fe.Code, Attr: fe.Attr})
		}
	}
	strip := make([]Expected, len(want))
	for i, e := range want {
		e.Kind = ""
		strip[i] = e
	}
	if d := cmp.Diff(strip, got); d != "" {
		t.Errorf("validation problems (-announced +validator):\n%s", d)
	}
}

// Each invalid kind, applied to an otherwise valid account, gives exactly
// its code at its attr.
func TestInvalidKinds_AreTheValidatorsCodes(t *testing.T) {
	t.Parallel()
	v := validator(t)
	for _, kind := range InvalidKinds {
		t.Run(kind.Name, func(t *testing.T) {
			g := gen{rng: newRand(1), opts: Options{Supplier: "DEMO", BusinessContract: "BC-2024-0042", Vendor: "V", Reference: "R"}, ean: "K-1"}
			acc := g.account()
			kind.spoil(acc)
			body := mustJSON(t, acc)
			_, err := v.Validate(context.Background(), body)
			p, ok := problem.As(err)
			if !ok {
				t.Fatalf("validation: %v", err)
			}
			got := make([][2]string, len(p.Errors))
			for i, fe := range p.Errors {
				got[i] = [2]string{fe.Code, fe.Attr}
			}
			if d := cmp.Diff([][2]string{{kind.Code, kind.Attr}}, got); d != "" {
				t.Errorf("problems (-want +got):\n%s", d)
			}
		})
	}
}

func TestGenerate_IsDeterministicForASeed(t *testing.T) {
	t.Parallel()
	gen := func(seed uint64) string {
		var b bytes.Buffer
		if _, err := Generate(&b, Options{Accounts: 40, Seed: seed, InvalidRate: 0.2}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if a, b := gen(3), gen(3); a != b {
		t.Error("two runs with seed 3 differ")
	}
	if gen(3) == gen(4) {
		t.Error("seeds 3 and 4 give the same cohort")
	}
}

// Malformed lines are reported with their numbers and the reading goes on;
// blank lines are skipped; gzip is recognised by its magic bytes.
func TestReader_ReportsMalformedLinesAndGoesOn(t *testing.T) {
	t.Parallel()
	good := `{"account": {"import_supplier": "DEMO", "external_account_number": "A-%d"}}`
	text := strings.Join([]string{
		strings.Replace(good, "%d", "1", 1),
		`{"account": {"import_supplier": "DEMO"`,
		``,
		`{"account": {"import_supplier": "DEMO", "external_account_number": ""}}`,
		`{"account": [], "notes": []}`,
		`{"account": {"import_supplier": "DEMO", "external_account_number": "A-6"}, "notes": {}}`,
		`{"account": {"import_supplier": "DEMO", "external_account_number": "A-7"}, "extra": 1}`,
		strings.Replace(good, "%d", "8", 1) + ` {}`,
		strings.Replace(good, "%d", "9", 1),
	}, "\n")
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	for name, input := range map[string][]byte{"plain": []byte(text), "gzip": gz.Bytes()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			recs, bad := readAll(t, bytes.NewReader(input))
			var got []string
			for _, r := range recs {
				got = append(got, r.ExternalAccountNumber+"@"+itoa(r.Number))
			}
			if d := cmp.Diff([]string{"A-1@1", "A-9@9"}, got); d != "" {
				t.Errorf("records (-want +got):\n%s", d)
			}
			var lines []int
			for _, e := range bad {
				var le *LineError
				errors.As(e, &le)
				lines = append(lines, le.Number)
			}
			if d := cmp.Diff([]int{2, 4, 5, 6, 7, 8}, lines); d != "" {
				t.Errorf("malformed lines (-want +got):\n%s", d)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"account": {"import_supplier": "DEMO", "external_account_number": "A-1"}, "notes": [], "payment_instruction": {}}`))
	f.Add([]byte(`{"account": {}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		if strings.TrimSpace(r.ImportSupplier) == "" || strings.TrimSpace(r.ExternalAccountNumber) == "" || !isKind(r.Account, '{') {
			t.Fatalf("accepted %q as %+v", b, r)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func itoa(n int) string { return strconv.Itoa(n) }

// The example line of the migration runner's guide (docs/migration-runner.md,
// "The cohort file") is a cohort line whose account the validator accepts.
func TestDocs_ExampleLineIsAValidAccount(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../../docs/migration-runner.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(raw), "**The cohort file**")
	if !ok {
		t.Fatal("docs/migration-runner.md has no \"The cohort file\" paragraph")
	}
	_, block, ok := strings.Cut(sec, "```json\n")
	if !ok {
		t.Fatal("docs/migration-runner.md: the cohort file has no json example")
	}
	line, _, _ := strings.Cut(block, "\n")
	rec, err := Parse([]byte(line))
	if err != nil {
		t.Fatalf("example line: %v", err)
	}
	if _, err := validator(t).Validate(context.Background(), rec.Account); err != nil {
		t.Errorf("example account: %v", err)
	}
}
