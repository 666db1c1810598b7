package account

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// testToday is "now" for every test, so that the fixture's dates stay valid.
var testToday = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

// The catalogue rows the fixture testdata/account.json needs: supplier DEMO
// (GB), these tariff codes, and business contract BC-2024-0042 of DEMO.
var fixtureTariffs = []string{"E-1R-VAR-C", "E-1R-FIX-24M-C", "WH-RENT-STD", "HP-STD"}

const fixtureContract = "BC-2024-0042"

// Other catalogue rows: HIDDEN exists but the caller may not see it; OTHER
// has a contract of its own; IEDEMO is an Irish supplier.
const (
	hiddenSupplier = "HIDDEN"
	otherContract  = "BC-OTHER-1"
)

type bundle struct {
	db      *db.DB
	catalog Catalog
	v       Validator
}

// setup returns a fresh database with the fixture's catalogue rows and a
// Validator over it whose today is testToday. Subtests share one bundle.
func setup(t testing.TB) bundle {
	t.Helper()
	db := dbtest.New(t)
	ctx := context.Background()
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			t.Fatalf("setup: %v\n%s", err, q)
		}
	}
	mustExec(`INSERT INTO import_suppliers (code, country, document_root) VALUES
		('DEMO', 'GB', 'imports/demo'), ('HIDDEN', 'GB', ''), ('OTHER', 'GB', ''), ('IEDEMO', 'IE', '')`)
	mustExec(`INSERT INTO products (code) VALUES ('E-1R'), ('WH-RENT'), ('HP')`)
	mustExec(`INSERT INTO tariffs (product_id, code) SELECT p.id, t.code
		FROM (VALUES ('E-1R-VAR-C', 'E-1R'), ('E-1R-FIX-24M-C', 'E-1R'), ('WH-RENT-STD', 'WH-RENT'), ('HP-STD', 'HP')) AS t (code, product)
		JOIN products p ON p.code = t.product`)
	mustExec(`INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_name, company_number)
		SELECT id, 'BIZ-' || code, 'LTD', 'Company of ' || code, '0000' || id FROM import_suppliers WHERE code IN ('DEMO', 'OTHER')`)
	mustExec(`INSERT INTO business_contracts (business_id, supplier_id, identifier)
		SELECT b.id, b.supplier_id, CASE s.code WHEN 'DEMO' THEN $1 ELSE $2 END
		FROM businesses b JOIN import_suppliers s ON s.id = b.supplier_id`, fixtureContract, otherContract)
	var n int
	if err := db.GetContext(ctx, &n, `SELECT count(*) FROM tariffs`); err != nil || n != len(fixtureTariffs) {
		t.Fatalf("setup: %d tariffs inserted, want %d (%v)", n, len(fixtureTariffs), err)
	}
	// Supply types beyond the spec's five that the tests use, as the
	// operator would add them.
	mustExec(`INSERT INTO supply_types (code) VALUES ('TREATED'), ('GAS'), ('gas')`)
	cat := NewCatalog(db, func(code string) bool { return code != hiddenSupplier })
	return bundle{db: db, catalog: cat, v: Validator{Catalog: cat, SupplyTypes: NewSupplyTypeCatalog(db), Now: func() time.Time { return testToday }}}
}

func fixture(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// doc is the fixture decoded for editing; numbers stay json.Number.
type doc map[string]any

func fixtureDoc(t testing.TB) doc {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(fixture(t)))
	d.UseNumber()
	var m doc
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// walk returns the container that holds the last segment of path, and that
// segment.
func (d doc) walk(t testing.TB, path string) (any, string) {
	t.Helper()
	segs := strings.Split(path, ".")
	var cur any = map[string]any(d)
	for _, s := range segs[:len(segs)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[s]
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i >= len(c) {
				t.Fatalf("bad path %s at %s", path, s)
			}
			cur = c[i]
		default:
			t.Fatalf("bad path %s at %s", path, s)
		}
	}
	return cur, segs[len(segs)-1]
}

// set puts value at path (appending when the index is the array's length).
func (d doc) set(t testing.TB, path string, value any) doc {
	t.Helper()
	c, last := d.walk(t, path)
	switch c := c.(type) {
	case map[string]any:
		c[last] = value
	case []any:
		i, _ := strconv.Atoi(last)
		if i == len(c) {
			// Appending needs the parent to hold the new slice.
			parent, key := d.walk(t, path[:strings.LastIndexByte(path, '.')])
			c = append(c, value)
			switch p := parent.(type) {
			case map[string]any:
				p[key] = c
			case []any:
				j, _ := strconv.Atoi(key)
				p[j] = c
			}
			return d
		}
		c[i] = value
	default:
		t.Fatalf("set %s: not a container", path)
	}
	return d
}

func (d doc) del(t testing.TB, path string) doc {
	t.Helper()
	c, last := d.walk(t, path)
	m, ok := c.(map[string]any)
	if !ok {
		t.Fatalf("del %s: not in an object", path)
	}
	delete(m, last)
	return d
}

func (d doc) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type pair struct{ Attr, Code string }

// fieldErrors returns the field problems of err, failing the test unless err
// is an Invalid *problem.Error with code account_failed_validation.
func fieldErrors(t testing.TB, err error) []problem.FieldError {
	t.Helper()
	p, ok := problem.As(err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *problem.Error", err, err)
	}
	if p.Kind != problem.Invalid || p.Code != CodeFailedValidation || p.Detail != detailFailed {
		t.Fatalf("error = kind %v code %q detail %q, want Invalid %q", p.Kind, p.Code, p.Detail, CodeFailedValidation)
	}
	return p.Errors
}

func pairsOf(errs []problem.FieldError) []pair {
	out := make([]pair, len(errs))
	for i, e := range errs {
		out[i] = pair{e.Attr, e.Code}
	}
	return out
}

func hasPair(errs []problem.FieldError, want pair) bool {
	for _, e := range errs {
		if e.Attr == want.Attr && e.Code == want.Code {
			return true
		}
	}
	return false
}
