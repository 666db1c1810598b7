package validate

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseDecimal_ReadsExponentsExactlyInPlainForm(t *testing.T) {
	t.Parallel()
	tests := []struct {
		lit, want string
	}{
		{"1e2", "100"},
		{"2.5e-1", "0.25"},
		{"1E+2", "100"},
		{"1.50E+1", "15.0"},
		{"-1.5e1", "-15"},
		{"1e0002", "100"},
		{"0.1e-2", "0.001"},
		{"1e-38", "0." + strings.Repeat("0", 37) + "1"},
		{"0e0", "0"},
		// Without an exponent the literal is kept exactly as written.
		{"10.50", "10.50"},
		{"-0", "-0"},
		{"100", "100"},
	}
	for _, tt := range tests {
		d, err := ParseDecimal(tt.lit)
		if err != nil {
			t.Errorf("ParseDecimal(%q): %v", tt.lit, err)
			continue
		}
		if d.String() != tt.want {
			t.Errorf("ParseDecimal(%q) = %q, want %q", tt.lit, d, tt.want)
		}
	}
}

func TestParseDecimal_RefusesMalformedAndHugeNumbers(t *testing.T) {
	t.Parallel()
	for _, lit := range []string{
		"", "1e", "1e+", "e2", "1.e2", ".5e1", "01e2", "+1e2", "1e2.5", "1ee2", "0x10", "NaN",
		"1e1000", "1e-1000", "1e999999999", // exponents beyond three digits
		"1e40",                                // plain form longer than 40 characters
		"1e-40",                               // likewise, after the point
		"1" + strings.Repeat("0", 40) + "e-5", // literal longer than 40 characters
	} {
		if d, err := ParseDecimal(lit); err == nil {
			t.Errorf("ParseDecimal(%q) = %q, want an error", lit, d)
		}
	}
}

// weighed binds one pet with the given weight and wings literals.
func weighed(t *testing.T, weight, wings string) (pet, []pair) {
	t.Helper()
	o, errs := bindOwner(t, `{"id":"o","home":{"street":"a"},"pets":[{"kind":"BIRD","weight":`+weight+`,"wings":`+wings+`}]}`)
	var p pet
	if len(o.Pets) == 1 {
		p = o.Pets[0]
	}
	return p, pairs(errs)
}

func TestBind_NumbersWithExponentsBindAsDecimalsAndWholeIntegers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		weight, wings string
		wantWeight    string
		wantWings     int64
	}{
		{"exponent", "1e2", "1e2", "100", 100},
		{"negative exponent", "2.5e-1", "20e-1", "0.25", 2},
		{"capital E and plus sign", "1E+2", "1E+2", "100", 100},
		{"whole number with a fraction", "3.0", "2.00", "3.0", 2},
		{"largest int64 with an exponent", "1", "9223372036854775807e0", "1", 9223372036854775807},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, errs := weighed(t, tt.weight, tt.wings)
			if diff := cmp.Diff([]pair{}, errs); diff != "" {
				t.Fatalf("problems (-want +got):\n%s", diff)
			}
			if p.Weight == nil || p.Weight.String() != tt.wantWeight || p.Wings == nil || *p.Wings != tt.wantWings {
				t.Fatalf("weight %v, wings %v; want %s, %d", p.Weight, p.Wings, tt.wantWeight, tt.wantWings)
			}
			// The bound value encodes as a plain JSON number.
			b, err := json.Marshal(p.Weight)
			if err != nil || string(b) != tt.wantWeight {
				t.Errorf("weight encodes as %s, %v", b, err)
			}
		})
	}
}

func TestBind_NumbersThatAreNotWholeOrTooLargeAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		weight, wings string
		want          []pair
	}{
		{"fraction for an integer", "1", "15e-1", []pair{{"pets.0.wings", CodeInvalid}}},
		{"integer beyond int64", "1", "1e19", []pair{{"pets.0.wings", CodeInvalid}}},
		{"negative integer with an exponent", "1", "-1e1", []pair{{"pets.0.wings", CodeMinValue}}},
		{"negative decimal with an exponent", "-5e-1", "1", []pair{{"pets.0.weight", CodeMinValue}}},
		{"huge exponent", "1e999999999", "1e999999999", []pair{{"pets.0.weight", CodeInvalid}, {"pets.0.wings", CodeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := weighed(t, tt.weight, tt.wings)
			if diff := cmp.Diff(tt.want, errs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzParseDecimal checks ParseDecimal against math/big, which reads decimal
// literals exactly: every JSON number it accepts has the same value, and
// every JSON number with a short plain form is accepted.
func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"0", "-0.50", "1e2", "2.5e-1", "1E+2", "1.50E+1", "1e999", "0e-5", "1e", "01"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		checkNumber(t, lit)
	})
}

// checkNumber compares ParseDecimal and the integer binding of lit with
// math/big's exact reading of it, when lit is a JSON number.
func checkNumber(t *testing.T, lit string) {
	t.Helper()
	d, err := ParseDecimal(lit)
	v, perr := Parse([]byte(lit))
	if perr != nil || v.Kind != KindNumber || v.Raw != lit {
		if err == nil {
			t.Fatalf("ParseDecimal(%q) = %q, but it is not a JSON number", lit, d)
		}
		return
	}
	// The limits: the literal, the exponent and the plain form. math/big
	// is asked only about exponents within the limit: it cannot read huge
	// ones either.
	mant, exp, hasExp := strings.Cut(strings.ToLower(lit), "e")
	accept := len(lit) <= maxDecimalLen
	if hasExp && len(strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")) > maxExponentDigits {
		if err == nil {
			t.Fatalf("ParseDecimal(%q) = %q, want the exponent refused", lit, d)
		}
		return
	}
	want, ok := new(big.Rat).SetString(lit)
	if !ok {
		t.Fatalf("math/big cannot read JSON number %q", lit)
	}
	plain := lit
	if hasExp && accept {
		_, frac, _ := strings.Cut(mant, ".")
		e, _ := strconv.Atoi(strings.TrimLeft(exp, "+"))
		plain = want.FloatString(max(0, len(frac)-e))
		accept = len(plain) <= maxDecimalLen
	}
	if (err == nil) != accept {
		t.Fatalf("ParseDecimal(%q) = %q, %v; want accepted %v", lit, d, err, accept)
	}
	if err != nil {
		return
	}
	if d.String() != plain {
		t.Fatalf("ParseDecimal(%q) = %q, want %q", lit, d, plain)
	}
	if got := d.Decimal().Rat(); got.Cmp(want) != 0 {
		t.Fatalf("ParseDecimal(%q) = %s, math/big reads %s", lit, d, want.RatString())
	}
	n, ok := parseIntegerText(lit)
	whole := want.IsInt() && want.Num().IsInt64()
	if ok != whole || (ok && n != want.Num().Int64()) {
		t.Fatalf("parseIntegerText(%q) = %d, %v; math/big reads %s", lit, n, ok, want.RatString())
	}
}

// FuzzParseDecimalString: a string is accepted exactly when it matches the
// reference's pattern with at least one digit (and 40 characters at most),
// and then reads as the same number as math/big reads it.
func FuzzParseDecimalString(f *testing.F) {
	for _, s := range []string{"10.00", "00512.5", ".5", "5.", "-.5", "-", ".", "", "1e2", "+1", " 1", "1.2.3", "-0"} {
		f.Add(s)
	}
	pattern := regexp.MustCompile(`^-?[0-9]*(?:\.[0-9]*)?$`)
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDecimalString(s)
		want := pattern.MatchString(s) && strings.ContainsAny(s, "0123456789") && len(s) <= maxDecimalLen
		if (err == nil) != want {
			t.Fatalf("ParseDecimalString(%q) error = %v, want accepted %v", s, err, want)
		}
		if err != nil {
			return
		}
		r, ok := new(big.Rat).SetString(strings.Replace(strings.TrimSuffix(s, "."), "-.", "-0.", 1))
		if !ok {
			t.Fatalf("math/big cannot read %q", s)
		}
		if got, _ := new(big.Rat).SetString(d.Decimal().String()); got.Cmp(r) != 0 {
			t.Fatalf("ParseDecimalString(%q) = %s, want %s", s, d, r.RatString())
		}
		// The Decimal marshals its text as a JSON number, and keeps the
		// digits written after the point: the value and the precision sent.
		if v, err := Parse([]byte(d.String())); err != nil || v.Kind != KindNumber {
			t.Fatalf("ParseDecimalString(%q) = %q, not a JSON number", s, d)
		}
		_, fracSent, _ := strings.Cut(s, ".")
		if _, frac, _ := strings.Cut(d.String(), "."); frac != fracSent {
			t.Fatalf("ParseDecimalString(%q) = %q, want the digits after the point kept", s, d)
		}
	})
}

func TestBind_DecimalStringsBindAsTheSameDecimalAsNumbers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, weight, want string
	}{
		{"as the reference's amounts", `"4.0"`, "4.0"},
		{"the same value as a number", `4.0`, "4.0"},
		{"trailing zeros kept", `"0.500"`, "0.500"},
		{"leading zeros dropped, a JSON number again", `"007.25"`, "7.25"},
		{"leading point", `".5"`, "0.5"},
		{"trailing point", `"5."`, "5"},
		{"more digits than a float64 holds", `"1.000000000000000000001"`, "1.000000000000000000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, errs := weighed(t, tt.weight, "2")
			if diff := cmp.Diff([]pair{}, errs); diff != "" {
				t.Fatalf("problems (-want +got):\n%s", diff)
			}
			if p.Weight == nil || p.Weight.String() != tt.want {
				t.Fatalf("weight %v, want %s", p.Weight, tt.want)
			}
			if b, err := json.Marshal(p.Weight); err != nil || string(b) != tt.want {
				t.Errorf("weight encodes as %s, %v", b, err)
			}
		})
	}
}

func TestBind_DecimalStringsOutsideTheReferencesFormAreRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, weight string
		want         []pair
	}{
		{"exponent in a string", `"1e2"`, []pair{{"pets.0.weight", CodeInvalid}}},
		{"plus sign", `"+4"`, []pair{{"pets.0.weight", CodeInvalid}}},
		{"spaces", `" 4.0"`, []pair{{"pets.0.weight", CodeInvalid}}},
		{"no digit", `"."`, []pair{{"pets.0.weight", CodeInvalid}}},
		{"empty", `""`, []pair{{"pets.0.weight", CodeInvalid}}},
		{"words", `"four"`, []pair{{"pets.0.weight", CodeInvalid}}},
		{"negative where the field is not", `"-4.0"`, []pair{{"pets.0.weight", CodeMinValue}}},
		{"a boolean", `true`, []pair{{"pets.0.weight", CodeInvalid}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, errs := weighed(t, tt.weight, "2")
			if diff := cmp.Diff(tt.want, errs); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
