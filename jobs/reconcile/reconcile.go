// Package reconcile answers whether a cohort arrived whole: one Summary per
// account, computed by the same Go code from a cohort line (FromCohortLine,
// what importctl reconcile runs) and from the rows the service holds (Store,
// what the reconciliation endpoint streams), so that the two cannot drift.
//
// A summary counts the account's children, sums its money as exact decimal
// strings, and carries the digest of its canonical form (Canonical): the
// account's content as imported, without what the service assigns. Equal
// summaries mean the account arrived with the same content; Compare says
// field by field where two differ. docs/reconciliation.md is the user's
// guide and lists the choices made here.
package reconcile

import (
	"strconv"
)

// Summary is one account, as the cohort expects it or as the service holds
// it. Money is a string with two decimal places, never a float.
type Summary struct {
	ExternalAccountNumber string `json:"external_account_number"`
	// ServiceAccountNumber is the number the service gave the account;
	// empty on the cohort's side, which cannot know it.
	ServiceAccountNumber string `json:"service_account_number,omitempty"`
	Customers            int    `json:"customers"`
	SupplyPoints         int    `json:"supply_points"`
	Meters               int    `json:"meters"`
	Notes                int    `json:"notes"`
	Transactions         int    `json:"transactions"`
	Statements           int    `json:"statements"`
	PaymentInstructions  int    `json:"payment_instructions"`
	// TransactionsSum is the sum of the transactions' amounts as sent
	// (every amount positive or negative as written, whatever its type).
	TransactionsSum string `json:"transactions_sum"`
	// LedgerBalance is the ledger's balance: what the customer owes. The
	// cohort's side computes it from the transactions with E7's sign rule
	// (postimport.LedgerSign); the service's is the stored balance.
	LedgerBalance string `json:"ledger_balance"`
	// Digest is the SHA-256 of the canonical form, in hex.
	Digest string `json:"digest"`
}

// Difference is one field whose values differ between the cohort and the
// service.
type Difference struct {
	Field    string `json:"field"`
	Expected string `json:"expected"`
	Found    string `json:"found"`
}

// Fields are the names Compare reports, in its order.
var Fields = []string{"customers", "supply_points", "meters", "notes", "transactions", "statements",
	"payment_instructions", "transactions_sum", "ledger_balance", "digest"}

// Compare returns the fields of found that differ from expected, in the
// order of Fields; none when the account arrived as expected. The account
// numbers are not compared: the caller pairs summaries by external number.
func Compare(expected, found Summary) []Difference {
	var out []Difference
	ints := []struct {
		name string
		e, f int
	}{
		{"customers", expected.Customers, found.Customers},
		{"supply_points", expected.SupplyPoints, found.SupplyPoints},
		{"meters", expected.Meters, found.Meters},
		{"notes", expected.Notes, found.Notes},
		{"transactions", expected.Transactions, found.Transactions},
		{"statements", expected.Statements, found.Statements},
		{"payment_instructions", expected.PaymentInstructions, found.PaymentInstructions},
	}
	for _, c := range ints {
		if c.e != c.f {
			out = append(out, Difference{c.name, strconv.Itoa(c.e), strconv.Itoa(c.f)})
		}
	}
	for _, c := range []struct{ name, e, f string }{
		{"transactions_sum", expected.TransactionsSum, found.TransactionsSum},
		{"ledger_balance", expected.LedgerBalance, found.LedgerBalance},
		{"digest", expected.Digest, found.Digest},
	} {
		if c.e != c.f {
			out = append(out, Difference{c.name, c.e, c.f})
		}
	}
	return out
}

// summarise fills the counts and the digest of c; money is the caller's.
func summarise(c *Canonical) Summary {
	s := Summary{
		ExternalAccountNumber: c.ExternalAccountNumber,
		Customers:             len(c.Customers),
		Notes:                 len(c.Notes),
		Transactions:          len(c.Transactions),
		Statements:            len(c.Statements),
		PaymentInstructions:   len(c.PaymentInstructions),
	}
	for _, sa := range c.SupplyAddresses {
		s.SupplyPoints += len(sa.SupplyPoints)
		for _, sp := range sa.SupplyPoints {
			s.Meters += len(sp.Meters)
		}
	}
	s.Digest = c.Digest()
	return s
}
