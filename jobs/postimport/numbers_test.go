package postimport

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/shopspring/decimal"
)

// Exponents are JSON: amounts and the numbers of line and tax items written
// with one are read exactly, stored and answered as if written plainly.
func TestTransactions_NumbersWithExponentsAreReadExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, billedToMay)
	tx := supplyCharge("S1", "2025-06-15", "3.15e1")
	tx["line_items"] = []obj{{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
		"number_of_units": num("1.23456e2"), "net_amount": num("3e1"), "price_per_unit": num("2.43012E-1"),
		"units": []any{num("1.005E+2"), num("22956e-3")}}}
	tx["tax_items"] = []obj{{"amount": num("1.5e0"), "tax_type": "VAT", "value_taxed": num("3E+1"), "rate": num("5e-2"), "unit_type": "PROPORTION"}}
	res, err := b.svc.CreateTransactions(context.Background(), txBody(t, ean, tx, charge("C1", "2025-06-02", "1e2")), nil, visible)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	var decoded struct {
		Results []struct {
			Data map[string]any `json:"transaction_data"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &decoded); err != nil {
		t.Fatal(err)
	}
	if len(decoded.Results) != 2 {
		t.Fatalf("answer %s", out)
	}
	got := map[string]any{
		"amount":      decoded.Results[0].Data["amount"],
		"line_items":  decoded.Results[0].Data["line_items"],
		"tax_items":   decoded.Results[0].Data["tax_items"],
		"charge":      decoded.Results[1].Data["amount"],
		"balance":     b.balance(t, ean),
		"stored line": queryText(t, b, `SELECT units::text || ' ' || number_of_units::text || ' ' || net_amount::text || ' ' || price_per_unit::text FROM transaction_line_items`),
		"stored tax":  queryText(t, b, `SELECT amount::text || ' ' || value_taxed::text || ' ' || rate::text FROM transaction_tax_items`),
	}
	want := map[string]any{
		"amount": "31.50",
		"line_items": []any{map[string]any{"rate_band": "CONSUMPTION_STANDARD", "start_date": "2025-06-01", "end_date": "2025-06-10",
			"number_of_units": 123.456, "net_amount": "30.00", "price_per_unit": 0.243012, "units": []any{100.5, 22.956}}},
		"tax_items":   []any{map[string]any{"amount": "1.50", "tax_type": "VAT", "value_taxed": "30.00", "rate": 0.05, "unit_type": "PROPORTION"}},
		"charge":      "100.00",
		"balance":     "131.50",
		"stored line": "{100.5,22.956} 123.456 30.00 0.243012",
		"stored tax":  "1.50 30.00 0.05",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestStatements_GrossAmountWithAnExponentIsReadExactly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ean := b.newAccount(t, acct{})
	res, err := b.svc.CreateStatements(context.Background(),
		stBody(t, ean, with(statement("S1", "2025-01-01", "2025-01-31"), "gross_amount", num("1.234E+4"))), visible)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	var answer struct {
		Statements []struct {
			GrossAmount json.RawMessage `json:"gross_amount"`
		} `json:"statements"`
	}
	if err := json.Unmarshal(out, &answer); err != nil || len(answer.Statements) != 1 {
		t.Fatalf("answer %s: %v", out, err)
	}
	// The answer writes the amount as a number or as a string; either way
	// it is 12340, exactly.
	got, err := decimal.NewFromString(strings.Trim(string(answer.Statements[0].GrossAmount), `"`))
	if err != nil || !got.Equal(decimal.NewFromInt(12340)) {
		t.Errorf("gross_amount answered as %s, want 12340", answer.Statements[0].GrossAmount)
	}
	if ok := queryText(t, b, `SELECT (gross_amount = 12340)::text FROM historical_statements`); ok != "true" {
		t.Errorf("stored gross_amount is not 12340")
	}
}

// queryText runs a query of one text value.
func queryText(t *testing.T, b *bundle, query string) string {
	t.Helper()
	var s string
	if err := b.db.GetContext(context.Background(), &s, query); err != nil {
		t.Fatal(err)
	}
	return s
}
