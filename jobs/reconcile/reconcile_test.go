package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

func TestCanonicalJSON_OneSpellingPerValue(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"members sorted", `{"b": 1, "a": {"d": [1, 2], "c": null}}`, `{"a":{"c":null,"d":[1,2]},"b":1}`},
		{"trailing zeros", `[1.50, 1.0, 100, 1e2, -0.0]`, `[1.5,1,100,100,0]`},
		{"strings as encoding/json writes them", `"a<b>&\u00e9\n"`, `"a<b>&é\n"`},
		{"big exact numbers", `12345678901234567890.123456789`, `12345678901234567890.123456789`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("CanonicalJSON(%s) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}

func TestDigest_IgnoresTheOrderOfUnorderedListsAndSeesEveryChange(t *testing.T) {
	t.Parallel()
	base := func() Canonical {
		one := "1"
		return Canonical{ExternalAccountNumber: "A1",
			Notes:        []CanonicalNote{{Body: "x"}, {Body: "y", IsPinned: true}},
			Transactions: []CanonicalTx{{TransactionID: "T1", Amount: "1.00"}, {TransactionID: "T2", Amount: "2.00"}},
			Metadata:     []CanonicalField{{"a", `{}`}, {"b", `1`}},
			Statements:   []CanonicalSt{{StatementID: "S1", Number: &one}},
		}
	}
	a := base()
	want := a.Digest()
	b := base()
	slices.Reverse(b.Notes)
	slices.Reverse(b.Transactions)
	slices.Reverse(b.Metadata)
	if got := b.Digest(); got != want {
		t.Errorf("reordered lists change the digest")
	}
	empty := base()
	empty.Customers = []CanonicalCustomer{}
	if got := empty.Digest(); got != want {
		t.Errorf("an empty list and an omitted one differ")
	}
	for name, change := range map[string]func(*Canonical){
		"note body":        func(c *Canonical) { c.Notes[0].Body = "z" },
		"amount":           func(c *Canonical) { c.Transactions[1].Amount = "2.01" },
		"statement number": func(c *Canonical) { c.Statements[0].Number = nil },
		"metadata value":   func(c *Canonical) { c.Metadata[1].Value = `2` },
		"customer added":   func(c *Canonical) { c.Customers = append(c.Customers, CanonicalCustomer{}) },
	} {
		c := base()
		change(&c)
		if c.Digest() == want {
			t.Errorf("%s: the digest did not change", name)
		}
	}
}

func TestCompare_ListsEveryDifferentFieldInOrder(t *testing.T) {
	t.Parallel()
	e := Summary{ExternalAccountNumber: "A", Customers: 1, Notes: 2, TransactionsSum: "1.00", LedgerBalance: "1.00", Digest: "d1"}
	f := e
	f.ServiceAccountNumber = "A-00000001"
	if d := Compare(e, f); d != nil {
		t.Errorf("equal summaries differ: %v", d)
	}
	f.Notes, f.LedgerBalance, f.Digest = 3, "0.50", "d2"
	want := []Difference{{"notes", "2", "3"}, {"ledger_balance", "1.00", "0.50"}, {"digest", "d1", "d2"}}
	if d := cmp.Diff(want, Compare(e, f)); d != "" {
		t.Errorf("Compare (-want +got):\n%s", d)
	}
}

func TestFromCohortLine_RefusedPartsAreNamed(t *testing.T) {
	t.Parallel()
	acc := `{"import_supplier": "DEMO", "external_account_number": "A1", "billing_address": {"country": "GB", "postal_code": "M20 2GL"}}`
	for _, tc := range []struct {
		name string
		line Line
		part string
	}{
		{"account", Line{Account: []byte(`{"import_supplier": "DEMO", "external_account_number": "A1", "customers": [{"landline": "12345"}]}`)}, "account"},
		{"notes", Line{Account: []byte(acc), Notes: []byte(`[{}]`)}, "notes"},
		{"transactions", Line{Account: []byte(acc), Transactions: []byte(`[{"transaction_id": "T"}]`)}, "transactions"},
		{"statements", Line{Account: []byte(acc), Statements: []byte(`[{"statement_id": "S"}]`)}, "statements"},
		{"payment instruction", Line{Account: []byte(acc), PaymentInstruction: []byte(`{"vendor": 1}`)}, "payment_instruction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := FromCohortLine(context.Background(), tc.line, "GB")
			var le *LineError
			if !errors.As(err, &le) || le.Part != tc.part {
				t.Fatalf("error %v, want a LineError of %s", err, tc.part)
			}
			if _, ok := problem.As(err); !ok {
				t.Errorf("%v is not the service's refusal", err)
			}
		})
	}
}

// The store streams every account of the supplier once, in byte order of
// the external numbers whatever the database's collation, across page
// boundaries and from ?after=; another supplier's accounts are not in it,
// and a supplier the caller may not see is not found.
func TestStore_StreamsEveryAccountOnceInByteOrderAcrossPages(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := d.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO import_suppliers (code, country) VALUES ('ONE', 'GB'), ('TWO', 'IE')`)
	exec(`INSERT INTO operations_teams (name) VALUES ('Ops')`)
	numbers := []string{"b", "B", "a-1", "a_1", "a1", "Z", "é", "e", "10", "9", "a"}
	add := func(supplier, ext string, i int) {
		exec(`WITH p AS (INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number)
			SELECT id, $2, '{}', 'COMPLETED', $3 FROM import_suppliers WHERE code = $1 RETURNING id, supplier_id),
		a AS (INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id, operations_team_id, billing_country)
			SELECT $3, p.supplier_id, $2, p.id, (SELECT id FROM operations_teams), 'GB' FROM p RETURNING id)
		INSERT INTO ledgers (account_id, balance) SELECT id, 1.5 FROM a`, supplier, ext, fmt.Sprintf("A-%08X", i))
	}
	for i, n := range numbers {
		add("ONE", n, i)
	}
	add("TWO", "c", 100)
	want := slices.Clone(numbers)
	slices.Sort(want)
	for _, tc := range []struct {
		name      string
		size, pre int
		after     string
		want      []string
	}{
		{"one page", 0, 0, "", want},
		{"pages of three", 3, 0, "", want},
		{"pages of one, three read ahead", 1, 3, "", want},
		{"page size dividing the count", 11, 0, "", want},
		{"after", 2, 0, "a_1", want[slices.Index(want, "a_1")+1:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := &Store{db: d, PageSize: tc.size, Prefetch: tc.pre}
			sup, err := s.Supplier(ctx, "ONE", nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			err = s.Stream(ctx, sup, tc.after, func(sum Summary) error {
				got = append(got, sum.ExternalAccountNumber)
				if sum.LedgerBalance != "1.50" || sum.TransactionsSum != "0.00" || !strings.HasPrefix(sum.ServiceAccountNumber, "A-") {
					t.Errorf("summary %+v", sum)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("stream (-want +got):\n%s", d)
			}
		})
	}
	t.Run("invisible supplier", func(t *testing.T) {
		t.Parallel()
		_, err := NewStore(d).Supplier(ctx, "TWO", func(code string) bool { return code == "ONE" })
		if p, ok := problem.As(err); !ok || p.Kind != problem.NotFound || p.Code != "import_supplier_not_found" {
			t.Errorf("error %v, want import_supplier_not_found", err)
		}
	})
	t.Run("emit error stops the stream", func(t *testing.T) {
		t.Parallel()
		s := &Store{db: d, PageSize: 2}
		sup, _ := s.Supplier(ctx, "ONE", nil)
		stop := errors.New("stop")
		n := 0
		err := s.Stream(ctx, sup, "", func(Summary) error { n++; return stop })
		if !errors.Is(err, stop) || n != 1 {
			t.Errorf("error %v after %d summaries, want stop after 1", err, n)
		}
	})
}

// A stream holds one database connection at a time, the one its request's
// share of the pool counts: the listing of the next page and the reading
// of the page before take turns. Reading ahead once took two connections
// per stream. With a pool of one connection, no query of the stream waits
// for the pool.
func TestStore_StreamUsesOneConnectionAtATime(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	if _, err := d.Exec(`INSERT INTO import_suppliers (code, country) VALUES ('ONE', 'GB');
		INSERT INTO operations_teams (name) VALUES ('Ops');
		WITH p AS (INSERT INTO import_processes (supplier_id, external_account_number, payload, status, service_account_number)
			SELECT s.id, 'E' || lpad(i::text, 4, '0'), '{}', 'COMPLETED', 'A-' || lpad(i::text, 8, '0')
			FROM import_suppliers s, generate_series(1, 60) AS i RETURNING id, supplier_id, external_account_number, service_account_number),
		a AS (INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id, operations_team_id, billing_country)
			SELECT p.service_account_number, p.supplier_id, p.external_account_number, p.id, (SELECT id FROM operations_teams), 'GB' FROM p RETURNING id)
		INSERT INTO ledgers (account_id, balance) SELECT id, 0 FROM a`); err != nil {
		t.Fatal(err)
	}
	d.SetMaxOpenConns(1)
	s := &Store{db: d, PageSize: 1, Prefetch: 3}
	sup, err := s.Supplier(ctx, "ONE", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The first streams prepare their statements, on the pool in the
	// background (db.Tx), which waits for the one connection; a later
	// stream finds them prepared and should never wait. Reading ahead on
	// a second connection made about 100 waits in every stream.
	var waits []int64
	for range 5 {
		before := d.Stats().WaitCount
		n := 0
		if err := s.Stream(ctx, sup, "", func(Summary) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		if n != 60 {
			t.Fatalf("%d summaries, want 60", n)
		}
		waits = append(waits, d.Stats().WaitCount-before)
		if waits[len(waits)-1] == 0 {
			return
		}
	}
	t.Errorf("waits for the pool in each of 5 streams: %v, want a stream without any", waits)
}
