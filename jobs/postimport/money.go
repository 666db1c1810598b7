package postimport

import (
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Money is an amount in the currency's major unit with at most two decimal
// places. It is parsed from the JSON number's literal text, never through
// float64, stored in numeric(14, 2) columns and answered as a string with
// exactly two places ("71.00"), so that no client parses it into a float
// either.
type Money struct{ d decimal.Decimal }

// maxMoney bounds amounts (exclusive): ten billion in the major unit. It
// leaves numeric(14, 2), which holds up to 999,999,999,999.99, room for a
// ledger balance made of many such amounts, and no real household or
// business bill comes near it.
var maxMoney = decimal.New(1, 10)

// Decimal returns the amount for arithmetic.
func (m Money) Decimal() decimal.Decimal { return m.d }

// String returns the amount with exactly two decimal places ("-5.00").
func (m Money) String() string { return m.d.StringFixed(2) }

// MarshalJSON writes the amount as a JSON string with two decimal places.
func (m Money) MarshalJSON() ([]byte, error) {
	return []byte(`"` + m.String() + `"`), nil
}

// Equal reports whether both amounts are the same number; go-cmp uses it.
func (m Money) Equal(o Money) bool { return m.d.Equal(o.d) }

// parseMoney checks a JSON value as an amount and reports each problem at
// the walker's path.
func parseMoney(w *validate.Walker, v *validate.Value) (Money, bool) {
	switch v.Kind {
	case validate.KindNumber:
	case validate.KindNull:
		w.Add(validate.CodeInvalid, "This field may not be null.")
		return Money{}, false
	default:
		w.Add(validate.CodeInvalid, "Expected a number but got %s.", v.Kind)
		return Money{}, false
	}
	// ParseDecimal reads 1e2 as 100 and refuses literals (and plain forms)
	// over 40 characters, so that 1e999999 cannot make the decimal
	// arithmetic below expensive.
	n, err := validate.ParseDecimal(v.Text)
	if err != nil {
		w.Add(validate.CodeInvalid, "A valid amount is required: a number of at most 40 characters, also when written without an exponent.")
		return Money{}, false
	}
	d := n.Decimal()
	ok := true
	// Trailing zeros are not precision: 71.000 is 71.00. Anything that
	// rounding to cents would change is refused, never rounded silently.
	if !d.Equal(d.Round(2)) {
		w.Add(CodeAmountPrecision, "An amount has at most 2 decimal places; %s has more.", v.Text)
		ok = false
	}
	if d.Abs().GreaterThanOrEqual(maxMoney) {
		w.Add(CodeAmountOutOfRange, "The amount must be between -9999999999.99 and 9999999999.99.")
		ok = false
	}
	if !ok {
		return Money{}, false
	}
	return Money{d.Round(2)}, true
}

// moneyNote is the reference text of every money field.
const moneyNote = "A JSON number with at most 2 decimal places, below 10,000,000,000 in absolute value; answered as a string with two places (\"71.00\")."

// moneyField is a required money field of T.
func moneyField[T any](name string, at func(*T) *Money, extraCodes ...string) validate.Field[T] {
	spec := &validate.Spec{Name: name, Type: validate.TypeDecimal, Required: true, Note: moneyNote,
		Codes: append([]string{CodeAmountPrecision, CodeAmountOutOfRange}, extraCodes...)}
	return validate.Custom(spec, func(w *validate.Walker, v *validate.Value, dst *T) {
		if m, ok := parseMoney(w, v); ok {
			*at(dst) = m
		}
	})
}

// decimalListField is an optional array of plain decimal numbers.
func decimalListField[T any](name string, at func(*T) *[]validate.Decimal, note string) validate.Field[T] {
	// The schema has no list-of-numbers type; the reference renders this
	// row's type from unitsType (see Reference).
	spec := &validate.Spec{Name: name, Type: validate.TypeDecimal, Note: note, MaxItems: maxUnits}
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
			d, err := validate.ParseDecimal(it.Text)
			switch {
			case it.Kind != validate.KindNumber:
				w.Add(validate.CodeInvalid, "Expected a number but got %s.", it.Kind)
				ok = false
			case err != nil:
				w.Add(validate.CodeInvalid, "A valid number is required: at most 40 characters, also when written without an exponent.")
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
