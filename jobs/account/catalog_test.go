package account

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCatalog_AnswersFromTheDatabase(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cat := b.catalog

	demo, ok, err := cat.Supplier(ctx, "DEMO")
	if err != nil || !ok || demo.ID == 0 || demo.Country != "GB" || demo.Status != "Ongoing" || demo.DocumentRoot != "imports/demo" {
		t.Fatalf("Supplier(DEMO) = %+v, %v, %v", demo, ok, err)
	}
	for _, code := range []string{"NOPE", hiddenSupplier, ""} {
		if s, ok, err := cat.Supplier(ctx, code); ok || err != nil {
			t.Errorf("Supplier(%q) = %+v, %v, %v; want not found", code, s, ok, err)
		}
	}

	missing, err := cat.MissingTariffs(ctx, []string{"Z-GONE", "E-1R-VAR-C", "A-GONE", "HP-STD"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Z-GONE", "A-GONE"}, missing); diff != "" {
		t.Errorf("MissingTariffs (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		identifier string
		want       bool
	}{{fixtureContract, true}, {otherContract, false}, {"BC-NOPE", false}} {
		got, err := cat.ContractExists(ctx, demo.ID, tc.identifier)
		if err != nil || got != tc.want {
			t.Errorf("ContractExists(DEMO, %s) = %v, %v; want %v", tc.identifier, got, err, tc.want)
		}
	}
}

func TestCatalog_LookupAgreesWithTheSingleQuestions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	bc := b.catalog.(BatchCatalog)
	tariffs := []string{"E-GONE", "E-1R-VAR-C"}
	for _, tc := range []struct{ supplier, contract string }{
		{"DEMO", fixtureContract}, {"DEMO", otherContract}, {"DEMO", ""}, {"OTHER", otherContract},
		{hiddenSupplier, ""}, {"NOPE", fixtureContract}, {"", ""},
	} {
		got, err := bc.Lookup(ctx, tc.supplier, tariffs, tc.contract)
		if err != nil {
			t.Fatal(err)
		}
		var want Lookup
		want.Supplier, want.SupplierFound, _ = b.catalog.Supplier(ctx, tc.supplier)
		want.MissingTariffs, _ = b.catalog.MissingTariffs(ctx, tariffs)
		if want.SupplierFound && tc.contract != "" {
			want.ContractExists, _ = b.catalog.ContractExists(ctx, want.Supplier.ID, tc.contract)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Lookup(%q, %q) (-single questions +lookup):\n%s", tc.supplier, tc.contract, diff)
		}
	}
}

// countingCatalog passes every question to the real catalogue and counts
// the round trips. It hides Lookup, so the Validator asks one at a time.
type countingCatalog struct {
	real  Catalog
	calls atomic.Int32
}

func (c *countingCatalog) Supplier(ctx context.Context, code string) (Supplier, bool, error) {
	c.calls.Add(1)
	return c.real.Supplier(ctx, code)
}

func (c *countingCatalog) MissingTariffs(ctx context.Context, codes []string) ([]string, error) {
	c.calls.Add(1)
	return c.real.MissingTariffs(ctx, codes)
}

func (c *countingCatalog) ContractExists(ctx context.Context, id int64, identifier string) (bool, error) {
	c.calls.Add(1)
	return c.real.ContractExists(ctx, id, identifier)
}

// countingBatch adds Lookup.
type countingBatch struct{ countingCatalog }

func (c *countingBatch) Lookup(ctx context.Context, s string, t []string, bc string) (Lookup, error) {
	c.calls.Add(1)
	return c.real.(BatchCatalog).Lookup(ctx, s, t, bc)
}

func TestValidate_AsksTheCatalogueOnceOrAtMostThreeTimes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	broken := fixtureDoc(t).set(t, elec+"agreements.0.tariff_code", "E-GONE").set(t, "business.business_contract_identifier", "BC-NOPE").bytes(t)

	single := &countingCatalog{real: b.catalog}
	batch := &countingBatch{countingCatalog{real: b.catalog}}
	for _, body := range [][]byte{fixture(t), broken} {
		single.calls.Store(0)
		batch.calls.Store(0)
		a1, err1 := Validator{Catalog: single, Now: b.v.Now}.Validate(ctx, body)
		a2, err2 := Validator{Catalog: batch, Now: b.v.Now}.Validate(ctx, body)
		if n := single.calls.Load(); n > 3 {
			t.Errorf("%d round trips with a plain Catalog, want at most 3", n)
		}
		if n := batch.calls.Load(); n != 1 {
			t.Errorf("%d round trips with a BatchCatalog, want 1", n)
		}
		if diff := cmp.Diff(a1, a2); diff != "" {
			t.Errorf("accounts differ (-one at a time +batch):\n%s", diff)
		}
		if diff := cmp.Diff(err1, err2); diff != "" {
			t.Errorf("errors differ (-one at a time +batch):\n%s", diff)
		}
	}
}

// Every validation runs the lookup, so it must run on PostgreSQL's cached
// generic plan instead of being planned again for each call (which costs
// more than running it): after the five executions on which PostgreSQL
// compares plans, it must have chosen the generic one, whatever the inputs.
func TestLookup_RunsOnTheCachedPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.db.SetMaxOpenConns(1) // one connection, so that its prepared statements are the ones read below
	bc := NewCatalog(b.db, nil).(BatchCatalog)
	inputs := []struct {
		tariffs  []string
		contract string
	}{{nil, ""}, {[]string{"E-1R-VAR-C"}, ""}, {[]string{"E-1R-VAR-C", "E-GONE"}, fixtureContract}, {[]string{"HP-STD"}, "BC-NOPE"}}
	for i := range 12 {
		in := inputs[i%len(inputs)]
		if _, err := bc.Lookup(ctx, "DEMO", in.tariffs, in.contract); err != nil {
			t.Fatal(err)
		}
	}
	var plans struct {
		Generic int64 `db:"generic_plans"`
		Custom  int64 `db:"custom_plans"`
	}
	if err := b.db.GetContext(ctx, &plans, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement = $1`, lookupSQL); err != nil {
		t.Fatalf("the lookup's prepared statement: %v", err)
	}
	if plans.Generic == 0 || plans.Custom > 6 {
		t.Errorf("12 lookups ran on %d generic and %d custom plans; want the generic plan chosen after the first five", plans.Generic, plans.Custom)
	}
}
