package postimport

import (
	"strings"

	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Money is an amount in the currency's major unit, kept exactly as sent:
// up to 10 decimal places, as the reference's pattern for amounts allows
// (^-?\d{0,10}(?:\.\d{0,10})?$; fractional-penny line items are real). It
// is read from the JSON number's literal text or from a decimal string,
// never through float64, stored in numeric columns with the scale of
// String (at least two places, at most ten), summed exactly
// into the ledger, and answered as a string (String), so that no client
// parses it into a float either.
type Money struct{ d decimal.Decimal }

// maxMoney bounds amounts (exclusive): ten billion in the major unit, the
// reference's ten digits before the point.
var maxMoney = decimal.New(1, 10)

// maxMoneyPlaces is the reference's ten digits after the point.
const maxMoneyPlaces = 10

// Decimal returns the amount for arithmetic.
func (m Money) Decimal() decimal.Decimal { return m.d }

// String returns the exact amount with at least two decimal places and no
// trailing zeros beyond them: "-5.00", "0.125".
func (m Money) String() string {
	places := 0
	if _, frac, ok := strings.Cut(m.d.String(), "."); ok { // String drops trailing zeros
		places = len(frac)
	}
	return m.d.StringFixed(int32(max(2, places)))
}

// MarshalJSON writes the exact amount as a JSON string (String).
func (m Money) MarshalJSON() ([]byte, error) {
	return []byte(`"` + m.String() + `"`), nil
}

// Equal reports whether both amounts are the same number; go-cmp uses it.
func (m Money) Equal(o Money) bool { return m.d.Equal(o.d) }

// Amount is a transaction's amount: exact like Money everywhere (the ledger
// sums exact values), but answered with exactly two decimal places, as spec
// 2.7 says ("decimal string with two places in responses"), rounded half
// away from zero ("0.125" is answered "0.13", "-0.125" "-0.13").
type Amount struct{ Money }

// Equal reports whether both amounts are the same number; go-cmp uses it.
func (a Amount) Equal(o Amount) bool { return a.d.Equal(o.d) }

// Answer returns the amount as answered: two places, rounded half away
// from zero.
func (a Amount) Answer() string { return a.d.StringFixed(2) }

// MarshalJSON writes Answer as a JSON string.
func (a Amount) MarshalJSON() ([]byte, error) {
	return []byte(`"` + a.Answer() + `"`), nil
}

// parseMoney checks a JSON value as an amount and reports each problem at
// the walker's path. The reference types amounts as decimal strings and
// its own examples send both forms ("10.00" and 10.0): a JSON number and a
// string holding a plain decimal are read the same way, exactly.
func parseMoney(w *validate.Walker, v *validate.Value) (Money, bool) {
	var (
		n   validate.Decimal
		err error
	)
	switch v.Kind {
	case validate.KindNumber:
		// ParseDecimal reads 1e2 as 100 and refuses literals (and plain
		// forms) over 40 characters, so that 1e999999 cannot make the
		// decimal arithmetic below expensive.
		n, err = validate.ParseDecimal(v.Text)
	case validate.KindString:
		// A string has the reference's form: an optional minus sign,
		// digits and an optional point; no exponent, no spaces.
		n, err = validate.ParseDecimalString(v.Text)
	case validate.KindNull:
		w.Add(validate.CodeInvalid, "This field may not be null.")
		return Money{}, false
	default:
		w.Add(validate.CodeInvalid, "Expected a number or a decimal string but got %s.", v.Kind)
		return Money{}, false
	}
	if err != nil {
		w.Add(validate.CodeInvalid, "A valid amount is required: a number, or a decimal string such as \"10.00\", of at most 40 characters.")
		return Money{}, false
	}
	d := n.Decimal()
	ok := true
	// Trailing zeros are not precision: 71.000 is 71. Anything beyond ten
	// places is refused, never rounded silently.
	if !d.Equal(d.Round(maxMoneyPlaces)) {
		w.Add(CodeAmountPrecision, "An amount has at most %d decimal places; %s has more.", maxMoneyPlaces, v.Text)
		ok = false
	}
	if d.Abs().GreaterThanOrEqual(maxMoney) {
		w.Add(CodeAmountOutOfRange, "The amount must be above -10000000000 and below 10000000000.")
		ok = false
	}
	if !ok {
		return Money{}, false
	}
	return Money{d}, true
}

// ParseMoney reads a JSON value as an amount, as every money field of E7 is
// read, and reports each problem at the walker's path: the account
// payload's ledger reads its balances with it.
func ParseMoney(w *validate.Walker, v *validate.Value) (Money, bool) { return parseMoney(w, v) }

// MoneyOf is d as Money, for amounts computed from others (sums); d must
// have at most ten decimal places to be stored.
func MoneyOf(d decimal.Decimal) Money { return Money{d} }

// moneyNote is the reference text of every money field but amount.
const moneyNote = "A JSON number or a decimal string (\"10.00\"), at most 10 decimal places, below 10,000,000,000 in absolute value; kept exactly, and answered as a string with at least two places (\"44.00\", \"0.125\")."

// amountNote is the reference text of a transaction's amount.
const amountNote = "A JSON number or a decimal string (\"10.00\"), at most 10 decimal places, below 10,000,000,000 in absolute value; kept exactly (the ledger sums exact values), and answered as a string with two places, rounded half away from zero (\"0.125\" is answered \"0.13\"), as spec 2.7 says."

// moneyField is a required money field of T.
func moneyField[T any](name, note string, at func(*T) *Money, extraCodes ...string) validate.Field[T] {
	spec := &validate.Spec{Name: name, Type: validate.TypeDecimal, Required: true, Note: note,
		Codes: append([]string{CodeAmountPrecision, CodeAmountOutOfRange}, extraCodes...)}
	return validate.Custom(spec, func(w *validate.Walker, v *validate.Value, dst *T) {
		if m, ok := parseMoney(w, v); ok {
			*at(dst) = m
		}
	})
}

// decimalListField is an optional array of plain decimal numbers.
func decimalListField[T any](name string, at func(*T) *[]validate.Decimal, note string, codes ...string) validate.Field[T] {
	// The schema has no list-of-numbers type; the reference renders this
	// row's type from unitsType (see Reference).
	spec := &validate.Spec{Name: name, Type: validate.TypeDecimal, Note: note, MaxItems: maxUnits, Codes: codes}
	return validate.Custom(spec, func(w *validate.Walker, v *validate.Value, dst *T) {
		if v.Kind == validate.KindNull {
			w.Add(validate.CodeInvalid, "This field may not be null.")
			return
		}
		if v.Kind != validate.KindArray {
			w.Add(validate.CodeInvalid, "Expected an array of numbers but got %s.", v.Kind)
			return
		}
		ok := true
		if v.Truncated {
			w.Add(validate.CodeTooManyItems, "Ensure this field has no more than %d elements.", maxUnits)
			ok = false
		}
		out := make([]validate.Decimal, 0, len(v.Items))
		for i := range v.Items {
			w.PushIndex(i)
			it := &v.Items[i]
			// A number or a decimal string, as every decimal field.
			d, err := validate.ParseDecimalValue(it)
			switch {
			case it.Kind != validate.KindNumber && it.Kind != validate.KindString:
				w.Add(validate.CodeInvalid, "Expected a number but got %s.", it.Kind)
				ok = false
			case err != nil:
				w.Add(validate.CodeInvalid, "A valid number is required: a JSON number or a decimal string (\"4.0\"), at most 40 characters, also when written without an exponent.")
				ok = false
			default:
				out = append(out, d)
			}
			w.Pop()
		}
		if ok {
			*at(dst) = out
		}
	})
}
