package postimport

import (
	"encoding/json"
	"math/big"
	"net/url"
	"strings"
	"testing"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// checkRefusal fails unless err is nil or an Invalid problem whose every
// field problem has a code and an attr.
func checkRefusal(t *testing.T, err error) *problem.Error {
	t.Helper()
	if err == nil {
		return nil
	}
	p, ok := problem.As(err)
	if !ok || p.Kind != problem.Invalid || p.Code == "" || p.Detail == "" {
		t.Fatalf("error %v (%T) is not an Invalid problem with a code", err, err)
	}
	if p.Code != CodeParseError && len(p.Errors) == 0 {
		t.Fatalf("refusal %s without problems", p.Code)
	}
	for _, e := range p.Errors {
		if e.Code == "" || e.Attr == "" || e.Detail == "" {
			t.Fatalf("problem without code, attr or detail: %+v", e)
		}
	}
	return p
}

var fuzzSeeds = []string{
	``, `null`, `[]`, `{}`, `{"import_supplier": "ACME"`, `{"a": 1, "a": 2}`, "\"\xff\"",
	`{"import_supplier": "ACME", "external_account_number": "E1", "notes": [{"body": "x"}, {"document_paths": [{"document_path": "a/b.pdf"}]}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "notes": [{"body": "x", "is_pinned": true, "unpin_at": "2025-01-01T00:00:00Z", "created_at": "2024-01-01T00:00:00Z"}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "transactions": [{"transaction_id": "T", "transaction_date": "2025-06-01", "amount": 71.10, "type": "CHARGE", "reason": "IMPORTED_CHARGE"}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "transactions": [{"transaction_id": "T", "transaction_date": "2025-06-01", "amount": 3, "type": "SUPPLY_CHARGE", "product_code": "P",
		"line_items": [{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-05-01", "end_date": "2025-05-31", "number_of_units": 1.5, "net_amount": 3, "price_per_unit": 2, "units": [1, 0.5]}],
		"tax_items": [{"amount": 0.15, "tax_type": "VAT", "value_taxed": 3, "rate": 0.05}]}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "transactions": [{"transaction_id": "T", "transaction_date": "2025-06-01", "amount": "31.5", "type": "SUPPLY_CHARGE", "product_code": "P",
		"line_items": [{"rate_band": "C", "start_date": "2025-05-01", "end_date": "2025-05-31", "number_of_units": 123.456, "net_amount": "30.00", "price_per_unit": 0.243012, "units": [1, 2]},
			{"rate_band": "C", "start_date": "2025-05-01", "end_date": "2025-05-01", "number_of_units": 1, "net_amount": 0.125, "price_per_unit": 0.125}],
		"tax_items": [{"amount": 1.375, "tax_type": "VAT", "value_taxed": 30, "rate": 0.05, "unit_type": "PROPORTION"}]}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "transactions": [{"transaction_id": "T", "transaction_date": "2025-06-01", "amount": "00512.5", "type": "PAYMENT"}, {"transaction_id": "U", "transaction_date": "2025-06-01", "amount": 0.1234567891, "type": "CHARGE", "tax_items": [{"amount": ".5", "tax_type": "VAT", "value_taxed": "5.", "rate": -1}]}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "transactions": [{"transaction_id": "T", "transaction_date": "2025-06-01", "amount": 2, "type": "REPAYMENT", "product_code": "P", "line_items": [], "tax_items": [{"amount": 1, "tax_type": "VAT", "value_taxed": 2, "rate": 0.5}]}]}`,
	`{"transactions": [{"amount": "-.", "type": "CHARGE"}, {"amount": "1e2", "type": "CREDIT"}, {"amount": "0.12345678901", "type": "CREDIT"}]}`,
	`{"transactions": [1, "x", {"amount": 1e400, "type": "PAYMENT"}, {"amount": -0.001, "type": "CREDIT", "line_items": [{"units": [null]}]}]}`,
	`{"import_supplier": "ACME", "external_account_number": "E1", "statements": [{"statement_id": "S", "number": "1", "bill_period_from_date": "2025-01-01", "bill_period_to_date": "2025-01-31", "issued_date": "2025-02-01", "gross_amount": 10.5, "statement_path": "s/1.pdf"}]}`,
	`{"statements": [{"gross_amount": 99999999999999999999999999999999999999999, "statement_path": "../x"}]}`,
}

// Any bytes are either a request or an Invalid problem: never a panic,
// never a problem without its place.
func FuzzParseNotes(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseNotes(data)
		if checkRefusal(t, err) == nil {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("accepted request does not encode: %v", err)
			}
		}
	})
}

func FuzzParseTransactions(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), "")
	}
	f.Add([]byte(fuzzSeeds[9]), "check_previously_added=false&force_add_to_current_statement=0")
	f.Add([]byte(fuzzSeeds[9]), "check_previously_added=%zz")
	f.Fuzz(func(t *testing.T, data []byte, rawQuery string) {
		q, _ := url.ParseQuery(rawQuery) // what it can, as r.URL.Query() does
		r, _, err := ParseTransactions(data, q, testNow)
		p := checkRefusal(t, err)
		if p != nil {
			if p.Extra["status"] != TransactionImportError || p.Extra["error_detail"] == "" {
				t.Fatalf("refusal not in E7's form: %v", p.Extra)
			}
			if _, ok := p.Extra["transaction_data"]; !ok {
				t.Fatal("refusal without transaction_data")
			}
			if _, err := json.Marshal(p.Extra); err != nil {
				t.Fatalf("refusal does not encode: %v", err)
			}
			return
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("accepted request does not encode: %v", err)
		}
		for _, tx := range r.Transactions {
			checkItemsAsRationals(t, tx)
		}
	})
}

// checkItemsAsRationals holds an accepted transaction to the line item
// rules again, in big.Rat arithmetic from the amounts' text rather than
// shopspring's: every net amount is within half a unit of its last place
// (at least the second) of units times price, and a SUPPLY_CHARGE's amount
// is exactly its items' sum.
func checkItemsAsRationals(t *testing.T, tx Transaction) {
	t.Helper()
	rat := func(s string) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("%q does not read as a number", s)
		}
		return r
	}
	sum := new(big.Rat)
	for _, l := range tx.LineItems {
		net := l.NetAmount.String() // at least two places, no trailing zeros beyond them
		places := 0
		if _, frac, ok := strings.Cut(net, "."); ok {
			places = len(frac)
		}
		diff := new(big.Rat).Sub(rat(net), new(big.Rat).Mul(rat(l.NumberOfUnits.String()), rat(l.PricePerUnit.String())))
		half := new(big.Rat).SetFrac(big.NewInt(5), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(places+1)), nil))
		if diff.Abs(diff).Cmp(half) > 0 {
			t.Fatalf("accepted net_amount %s for %s × %s", net, l.NumberOfUnits, l.PricePerUnit)
		}
		if l.Units != nil && len(l.Units) != 2 {
			t.Fatalf("accepted units %v", l.Units)
		}
		sum.Add(sum, rat(net))
	}
	if tx.Type != TypeSupplyCharge {
		return
	}
	for _, x := range tx.TaxItems {
		sum.Add(sum, rat(x.Amount.String()))
	}
	if len(tx.LineItems) == 0 || rat(tx.Amount.String()).Cmp(sum) != 0 {
		t.Fatalf("accepted SUPPLY_CHARGE of %s with %d line items summing to %s", tx.Amount.String(), len(tx.LineItems), sum.FloatString(12))
	}
}

func FuzzParseStatements(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseStatements(data, testNow)
		if checkRefusal(t, err) == nil {
			if _, err := json.Marshal(r); err != nil {
				t.Fatalf("accepted request does not encode: %v", err)
			}
		}
	})
}
