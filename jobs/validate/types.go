package validate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// Date is a calendar date in the spec's YYYY-MM-DD form. It is a string so
// that it encodes as itself and compares chronologically with < and >.
type Date string

// ParseDate returns s as a Date when it is a real calendar date in
// YYYY-MM-DD form, and false otherwise.
func ParseDate(s string) (Date, bool) {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return "", false
	}
	y, ok1 := digits(s[0:4])
	m, ok2 := digits(s[5:7])
	d, ok3 := digits(s[8:10])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return "", false
	}
	return Date(s), true
}

// DateOf returns the date of t in t's location.
func DateOf(t time.Time) Date { return Date(t.Format(time.DateOnly)) }

// Time returns midnight UTC at the start of d; the zero Time if d is invalid.
func (d Date) Time() time.Time {
	t, _ := time.Parse(time.DateOnly, string(d))
	return t
}

// Datetime is an instant, normalised to UTC in RFC 3339 form with a "Z"
// and at most microsecond precision (what PostgreSQL stores): whole seconds
// read "2006-01-02T15:04:05Z", others "2006-01-02T15:04:05.5Z". Two
// Datetimes in whole seconds compare chronologically as strings; Compare
// orders any two.
type Datetime string

// ParseDatetime returns s, normalised to UTC, when it is a real instant in
// any RFC 3339 form (a "Z" or a numeric offset, optional fractional
// seconds), and false otherwise. Digits beyond the microsecond are dropped.
func ParseDatetime(s string) (Datetime, bool) {
	// time.Parse accepts a few forms RFC 3339 does not (a one-digit hour,
	// a comma before the fraction); the fixed positions below refuse them.
	if len(s) < 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return "", false
	}
	if s[19] == ',' {
		return "", false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return "", false
	}
	return datetimeOf(t.Truncate(time.Microsecond)), true
}

// DatetimeOf returns t in UTC as a Datetime, truncated to the second.
func DatetimeOf(t time.Time) Datetime { return Datetime(t.UTC().Format("2006-01-02T15:04:05Z")) }

func datetimeOf(t time.Time) Datetime {
	return Datetime(t.UTC().Format("2006-01-02T15:04:05.999999Z07:00"))
}

// Time returns the instant; the zero Time if dt is invalid.
func (dt Datetime) Time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, string(dt))
	return t
}

// Compare returns -1, 0 or +1 as dt is before, at or after o.
func (dt Datetime) Compare(o Datetime) int { return dt.Time().Compare(o.Time()) }

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func daysIn(y, m int) int {
	switch m {
	case 4, 6, 9, 11:
		return 30
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	}
	return 31
}

// Decimal is a non-integer number kept exactly as written: "10.50" stays
// "10.50" through validation, storage and re-validation, and is never a
// float64. A number written with an exponent, or in a JSON string, is kept
// in the plain form of a JSON number (see ParseDecimal and
// ParseDecimalString). The zero Decimal is invalid and marshals to an error.
type Decimal struct{ text string }

// maxDecimalLen bounds decimal literals, and the plain form of numbers
// written with an exponent, which no meter attribute or amount needs beyond
// a few digits, so that arithmetic on them stays cheap.
const maxDecimalLen = 40

// maxExponentDigits bounds the exponent of a number literal before any
// arithmetic, so that 1e999999999 costs nothing to refuse.
const maxExponentDigits = 3

// ParsePlainDecimal accepts a plain decimal literal: an optional minus sign,
// digits, and an optional fraction, at most 40 characters. It is the form of
// decimal numbers sent in JSON strings (a transfer reading's value); JSON
// numbers go through ParseDecimal.
func ParsePlainDecimal(s string) (Decimal, error) {
	if len(s) == 0 || len(s) > maxDecimalLen {
		return Decimal{}, errors.New("decimal: length out of range")
	}
	i := 0
	if s[0] == '-' {
		i++
	}
	intStart := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == intStart || (s[intStart] == '0' && i-intStart > 1) {
		return Decimal{}, errors.New("decimal: malformed integer part")
	}
	if i < len(s) && s[i] == '.' {
		i++
		fracStart := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == fracStart {
			return Decimal{}, errors.New("decimal: malformed fraction")
		}
	}
	if i != len(s) {
		return Decimal{}, errors.New("decimal: unexpected character")
	}
	return Decimal{text: s}, nil
}

// ParseDecimalString accepts a decimal number written in a JSON string, in
// the form of the reference's pattern for decimal strings,
// ^-?\d*(?:\.\d*)?$, with at least one digit: an optional minus sign,
// digits and an optional point, leading zeros, ".5" and "5." included; no
// exponent, no plus sign, no spaces. At most 40 characters. The Decimal's
// text is the plain form of a JSON number, since MarshalJSON writes it as
// one: "0" before a leading point, none after a trailing one ("-.5" is
// "-0.5", "5." is "5"), and no leading zero before another digit
// ("00512.5" is "512.5"). The digits after the point are kept as written
// ("4.0" stays "4.0"), so the value and its precision are the string's.
func ParseDecimalString(s string) (Decimal, error) {
	if len(s) == 0 || len(s) > maxDecimalLen {
		return Decimal{}, errors.New("decimal: length out of range")
	}
	sign, rest := "", s
	if rest[0] == '-' {
		sign, rest = "-", rest[1:]
	}
	whole, frac, point := strings.Cut(rest, ".")
	if whole == "" && frac == "" {
		return Decimal{}, errors.New("decimal: no digits")
	}
	for _, part := range []string{whole, frac} {
		if strings.Trim(part, "0123456789") != "" {
			return Decimal{}, errors.New("decimal: unexpected character")
		}
	}
	if whole = strings.TrimLeft(whole, "0"); whole == "" {
		whole = "0"
	}
	if !point || frac == "" {
		return Decimal{text: sign + whole}, nil
	}
	return Decimal{text: sign + whole + "." + frac}, nil
}

// ParseDecimal reads a JSON number literal as an exact decimal, through
// shopspring/decimal and never through float64. Exponents are JSON (RFC
// 8259, section 6), so they are accepted: a literal with one is rewritten in
// plain form, keeping the digits written after the point ("1e2" is "100",
// "2.5e-1" is "0.25", "1.50E+1" is "15.0"); a literal without one is kept as
// written. The literal and its plain form are each at most 40 characters.
func ParseDecimal(lit string) (Decimal, error) {
	i := strings.IndexAny(lit, "eE")
	if i < 0 {
		return ParsePlainDecimal(lit)
	}
	if _, err := ParsePlainDecimal(lit[:i]); err != nil || len(lit) > maxDecimalLen {
		return Decimal{}, errors.New("decimal: malformed number")
	}
	exp := lit[i+1:]
	if exp != "" && (exp[0] == '+' || exp[0] == '-') {
		exp = exp[1:]
	}
	if exp == "" || strings.Trim(exp, "0123456789") != "" {
		return Decimal{}, errors.New("decimal: malformed exponent")
	}
	if len(strings.TrimLeft(exp, "0")) > maxExponentDigits {
		return Decimal{}, errors.New("decimal: exponent out of range")
	}
	d, err := decimal.NewFromString(lit)
	if err != nil {
		return Decimal{}, fmt.Errorf("decimal: %w", err)
	}
	plain := d.StringFixed(max(0, -d.Exponent()))
	if len(plain) > maxDecimalLen {
		return Decimal{}, errors.New("decimal: length out of range")
	}
	return Decimal{text: plain}, nil
}

// String returns the literal as written, or its plain form (ParseDecimal).
func (d Decimal) String() string { return d.text }

// Decimal returns the value for arithmetic; zero for the zero Decimal.
func (d Decimal) Decimal() decimal.Decimal {
	if d.text == "" {
		return decimal.Zero
	}
	return decimal.RequireFromString(d.text) // ParseDecimal or ParsePlainDecimal made the text
}

// Negative reports whether the value is below zero ("-0" is not).
func (d Decimal) Negative() bool {
	if len(d.text) == 0 || d.text[0] != '-' {
		return false
	}
	for i := 1; i < len(d.text); i++ {
		if c := d.text[i]; c >= '1' && c <= '9' {
			return true
		}
	}
	return false
}

// Equal reports whether both literals are the same text; go-cmp uses it.
func (d Decimal) Equal(o Decimal) bool { return d.text == o.text }

// MarshalJSON writes the literal as a JSON number.
func (d Decimal) MarshalJSON() ([]byte, error) {
	if d.text == "" {
		return nil, errors.New("decimal: marshal of zero Decimal")
	}
	return []byte(d.text), nil
}

// UnmarshalJSON reads a JSON number as ParseDecimal does.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	v, err := ParseDecimal(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// Scalar is how one JSON type becomes a Go value of type V. The schema
// constructors Req and Opt take one of the Scalar variables below.
type Scalar[V any] struct {
	typ   Type
	parse func(w *Walker, s *Spec, v *Value) (V, bool)
}

// The scalar types fields can have.
var (
	StringValue = Scalar[string]{TypeString, parseString}
	// IntegerValue is a JSON number whose value is a whole number that fits
	// in 64 bits, however it is written: 100, 1e2 and 100.0 are all 100.
	IntegerValue = Scalar[int64]{TypeInteger, parseInteger}
	// DecimalValue is a JSON number or a JSON string holding a decimal
	// (ParseDecimalValue), read exactly either way.
	DecimalValue  = Scalar[Decimal]{TypeDecimal, parseDecimal}
	BooleanValue  = Scalar[bool]{TypeBoolean, parseBoolean}
	DateValue     = Scalar[Date]{TypeDate, parseDate}
	DatetimeValue = Scalar[Datetime]{TypeDatetime, parseDatetime}
)

func wrongType(w *Walker, want string, v *Value) {
	w.Add(CodeInvalid, "Expected %s but got %s.", want, v.Kind)
}

func parseString(w *Walker, s *Spec, v *Value) (string, bool) {
	if v.Kind != KindString {
		wrongType(w, "a string", v)
		return "", false
	}
	return v.Text, s.checkString(w, v.Text)
}

func parseInteger(w *Walker, s *Spec, v *Value) (int64, bool) {
	if v.Kind != KindNumber {
		wrongType(w, "an integer", v)
		return 0, false
	}
	n, ok := parseIntegerText(v.Text)
	if !ok {
		w.Add(CodeInvalid, "A valid integer is required.")
		return 0, false
	}
	if s.NonNegative && n < 0 {
		w.Add(CodeMinValue, "Ensure this value is greater than or equal to 0.")
		return 0, false
	}
	return n, true
}

// parseIntegerText reads a JSON number literal whose value is a whole
// number within int64.
func parseIntegerText(lit string) (int64, bool) {
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, true
	}
	d, err := ParseDecimal(lit)
	if err != nil || !d.Decimal().IsInteger() {
		return 0, false
	}
	// String writes an integral value without a fraction: "1.0" is "1".
	n, err := strconv.ParseInt(d.Decimal().String(), 10, 64)
	return n, err == nil
}

// ParseDecimalValue reads a decimal number sent either way the reference
// sends one: a JSON number (ParseDecimal) or a JSON string holding a
// decimal (ParseDecimalString; its examples send "10.00" and 10.0 alike).
// Both are exact and give the same Decimal for the same value written the
// same way ("4.0" and 4.0 are "4.0"). Any other kind is an error.
func ParseDecimalValue(v *Value) (Decimal, error) {
	switch v.Kind {
	case KindNumber:
		return ParseDecimal(v.Text)
	case KindString:
		return ParseDecimalString(v.Text)
	}
	return Decimal{}, fmt.Errorf("decimal: %s is not a number", v.Kind)
}

func parseDecimal(w *Walker, s *Spec, v *Value) (Decimal, bool) {
	if v.Kind != KindNumber && v.Kind != KindString {
		wrongType(w, "a number or a decimal string", v)
		return Decimal{}, false
	}
	d, err := ParseDecimalValue(v)
	if err != nil {
		w.Add(CodeInvalid, "A valid number is required: a JSON number, or a decimal string such as \"4.0\" (no exponent, plus sign or spaces), of at most %d characters, also when written without an exponent.", maxDecimalLen)
		return Decimal{}, false
	}
	if s.NonNegative && d.Negative() {
		w.Add(CodeMinValue, "Ensure this value is greater than or equal to 0.")
		return Decimal{}, false
	}
	return d, true
}

func parseBoolean(w *Walker, _ *Spec, v *Value) (bool, bool) {
	if v.Kind != KindBool {
		wrongType(w, "a boolean", v)
		return false, false
	}
	return v.Bool, true
}

func parseDate(w *Walker, _ *Spec, v *Value) (Date, bool) {
	if v.Kind != KindString {
		wrongType(w, "a date string", v)
		return "", false
	}
	d, ok := ParseDate(v.Text)
	if !ok {
		w.Add(CodeInvalidDate, "Date has wrong format. Use one of these formats instead: YYYY-MM-DD.")
	}
	return d, ok
}

func parseDatetime(w *Walker, _ *Spec, v *Value) (Datetime, bool) {
	if v.Kind != KindString {
		wrongType(w, "a datetime string", v)
		return "", false
	}
	d, ok := ParseDatetime(v.Text)
	if !ok {
		w.Add(CodeInvalidDatetime, "Datetime has wrong format. Use RFC 3339: YYYY-MM-DDTHH:MM:SSZ, or with an offset (+01:00) and optional fractional seconds.")
	}
	return d, ok
}
