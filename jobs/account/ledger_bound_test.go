package account

import (
	"strings"
	"testing"

	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// The bound a ledger's balance is checked against in validation is the one
// the database's ledgers_balance_range constraint holds E7 to: changing
// either alone fails here.
func TestLedgerBalanceBound_IsTheDatabasesConstraint(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var def string
	if err := d.Get(&def, `SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'ledgers_balance_range'`); err != nil {
		t.Fatal(err)
	}
	// CHECK ((abs(balance) < '1000000000000'::numeric)), or the bound as written.
	i := strings.Index(def, "<")
	if i < 0 {
		t.Fatalf("ledgers_balance_range is %s, want abs(balance) < a bound", def)
	}
	bound := strings.Trim(strings.TrimSpace(def[i+1:]), "()")
	bound, _, _ = strings.Cut(bound, "::")
	got, err := decimal.NewFromString(strings.Trim(bound, "' "))
	if err != nil {
		t.Fatalf("ledgers_balance_range's bound in %s: %v", def, err)
	}
	if !got.Equal(maxLedgerBalance) {
		t.Errorf("ledgers_balance_range bounds abs(balance) below %s; validation bounds it below %s", got, maxLedgerBalance)
	}
}
