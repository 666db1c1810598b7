package account

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCatalogCache_AnswersLikeTheDatabaseWithoutAskingAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	counted := &countingBatch{countingCatalog{real: b.catalog}}
	cache := newCatalogCache(counted, time.Minute)
	view := cache.View(func(code string) bool { return code != hiddenSupplier }).(BatchCatalog)
	bc := b.catalog.(BatchCatalog)

	questions := []struct {
		supplier string
		tariffs  []string
		contract string
	}{
		{"DEMO", fixtureTariffs, fixtureContract},
		{"DEMO", []string{"E-GONE", "HP-STD"}, otherContract},
		{hiddenSupplier, nil, ""},
		{"NOPE", []string{"E-1R-VAR-C"}, ""},
		{"OTHER", nil, otherContract},
	}
	for round := range 2 {
		for _, q := range questions {
			want, err := bc.Lookup(ctx, q.supplier, q.tariffs, q.contract)
			if err != nil {
				t.Fatal(err)
			}
			got, err := view.Lookup(ctx, q.supplier, q.tariffs, q.contract)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round %d: Lookup(%q, %v, %q) (-database +cache):\n%s", round, q.supplier, q.tariffs, q.contract, diff)
			}
		}
	}
	// In the first round every question but the invisible supplier's
	// (which asks nothing) went to the database; in the second only the two
	// with a negative part (a missing tariff or contract, an unknown
	// supplier) went again.
	if n := counted.calls.Load(); n != 4+2 {
		t.Errorf("%d round trips, want 6", n)
	}
}

func TestCatalogCache_ValidationOfAKnownPayloadNeedsNoRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	counted := &countingBatch{countingCatalog{real: b.catalog}}
	v := Validator{Catalog: newCatalogCache(counted, time.Minute).View(nil), Now: b.v.Now}
	first, err := v.Validate(ctx, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	second, err := v.Validate(ctx, fixture(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("cached validation differs:\n%s", diff)
	}
	if n := counted.calls.Load(); n != 1 {
		t.Errorf("%d round trips for two validations, want 1", n)
	}
}

func TestCatalogCache_NewTariffIsFoundAtOnceAndAnswersExpire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cache := NewCatalogCache(b.db, time.Minute)
	var mu sync.Mutex
	clock := testToday
	cache.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	view := cache.View(nil)

	if missing, _ := view.MissingTariffs(ctx, []string{"E-NEW"}); len(missing) != 1 {
		t.Fatalf("E-NEW found before it exists: %v", missing)
	}
	if _, err := b.db.Exec(`INSERT INTO tariffs (product_id, code) SELECT id, 'E-NEW' FROM products WHERE code = 'E-1R'`); err != nil {
		t.Fatal(err)
	}
	if missing, _ := view.MissingTariffs(ctx, []string{"E-NEW"}); len(missing) != 0 {
		t.Errorf("E-NEW still missing after it was created: %v", missing)
	}

	if _, ok, _ := view.Supplier(ctx, "DEMO"); !ok {
		t.Fatal("DEMO not found")
	}
	if _, err := b.db.Exec(`UPDATE import_suppliers SET status = 'Paused' WHERE code = 'DEMO'`); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := view.Supplier(ctx, "DEMO"); s.Status != "Ongoing" {
		t.Errorf("status within the TTL = %s, want the remembered Ongoing", s.Status)
	}
	mu.Lock()
	clock = clock.Add(time.Minute)
	mu.Unlock()
	if s, _, _ := view.Supplier(ctx, "DEMO"); s.Status != "Paused" {
		t.Errorf("status after the TTL = %s, want Paused", s.Status)
	}
}

func TestCatalogCache_ViewHidesSuppliersAnotherViewCached(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cache := NewCatalogCache(b.db, time.Minute)
	if _, ok, _ := cache.View(nil).Supplier(ctx, hiddenSupplier); !ok {
		t.Fatal("an unrestricted view does not see HIDDEN")
	}
	restricted := cache.View(func(code string) bool { return code != hiddenSupplier })
	if s, ok, _ := restricted.Supplier(ctx, hiddenSupplier); ok {
		t.Errorf("a restricted view sees %+v", s)
	}
}
