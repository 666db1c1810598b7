package account

import (
	_ "embed"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/idna"
)

//go:embed iso3166.txt
var iso3166 string

// countries is the set of officially assigned ISO 3166-1 alpha-2 codes.
var countries = func() map[string]bool {
	m := make(map[string]bool, 256)
	for line := range strings.Lines(iso3166) {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			m[line[:2]] = true
		}
	}
	return m
}()

// normaliseCountry upper-cases code and reports whether it is an officially
// assigned ISO 3166-1 alpha-2 code.
func normaliseCountry(code string) (string, bool) {
	c := strings.ToUpper(code)
	return c, len(c) == 2 && countries[c]
}

// postcodeRules maps a country to the check of its postcodes. A rule returns
// the normalised postcode and whether it is valid. Countries without a rule
// accept any text: a wrong refusal blocks a migration, while a postcode in an
// unknown format only needs a human look later. To add a country, add its
// rule here (and a test case); RULES.md lists the countries from this map.
var postcodeRules = map[string]func(string) (string, bool){
	// The Crown Dependencies share the UK postcode system.
	"GB": ukPostcode,
	"GG": ukPostcode,
	"IM": ukPostcode,
	"JE": ukPostcode,
}

func postcodeCountryList() string {
	var cs []string
	for c := range postcodeRules {
		cs = append(cs, "`"+c+"`")
	}
	slices.Sort(cs)
	return strings.Join(cs, ", ")
}

// ukPostcodeRE is the outward code (A9, A99, A9A, AA9, AA99, AA9A) followed
// by the inward code (9AA), spaces removed.
var ukPostcodeRE = regexp.MustCompile(`^([A-Z]{1,2}[0-9][A-Z0-9]?)([0-9][A-Z]{2})$`)

// ukPostcode accepts any spacing and case, and returns the Royal Mail form:
// upper case with one space before the three-character inward code.
func ukPostcode(s string) (string, bool) {
	c := strings.ToUpper(strings.Join(strings.Fields(s), ""))
	if c == "GIR0AA" { // Girobank's historic non-geographic postcode, still valid
		return "GIR 0AA", true
	}
	if !ukPostcodeRE.MatchString(c) {
		return s, false
	}
	return c[:len(c)-3] + " " + c[len(c)-3:], true
}

// normalisePostcode checks s against country's rule, if it has one.
func normalisePostcode(s, country string) (string, bool) {
	if rule, ok := postcodeRules[country]; ok {
		return rule(s)
	}
	return s, true
}

// Test e-mail addresses, as the reference defines them (section 6.3): an
// address that starts with "test@" or "xxx@", or ends with "@test.com",
// "@test.co.uk", ".xxx" or ".xx". Compared without regard to case.
var (
	testEmailPrefixes = []string{"test@", "xxx@"}
	testEmailSuffixes = []string{"@test.com", "@test.co.uk", ".xxx", ".xx"}
)

func testEmailRule() string {
	q := func(l []string) string {
		var out []string
		for _, s := range l {
			out = append(out, "`"+s+"`")
		}
		return strings.Join(out, " or ")
	}
	return "starts with " + q(testEmailPrefixes) + ", or ends with " + q(testEmailSuffixes) + " (in any case)"
}

func isTestEmail(addr string) bool {
	l := strings.ToLower(addr)
	return slices.ContainsFunc(testEmailPrefixes, func(p string) bool { return strings.HasPrefix(l, p) }) ||
		slices.ContainsFunc(testEmailSuffixes, func(x string) bool { return strings.HasSuffix(l, x) })
}

// normaliseEmail checks the address and lower-cases its domain. It returns
// the code of the problem, or "" when the address is acceptable. The
// reference asks only for "format email" (6.3), so every form of RFC 5321
// is a mailbox: a dot-atom or quoted local part, and a domain whose labels
// may be international (IDNA, checked in their ASCII form).
func normaliseEmail(s string) (string, string) {
	at := strings.LastIndexByte(s, '@')
	if at <= 0 || at == len(s)-1 {
		return s, CodeInvalidEmail
	}
	local, domain := s[:at], strings.ToLower(s[at+1:])
	if !validLocalPart(local) || !validDomain(domain) {
		return s, CodeInvalidEmail
	}
	if isTestEmail(s) {
		return s, CodeTestEmail
	}
	return local + "@" + domain, ""
}

// validLocalPart accepts an RFC 5321 local part of at most 64 octets: a
// dot-atom (atext runs joined by single dots) or a quoted string, whose
// characters are printable ASCII and spaces, with " and \ escaped by a
// backslash ("john smith", "a\"b").
func validLocalPart(s string) bool {
	if len(s) > 64 {
		return false
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		q := s[1 : len(s)-1]
		for i := 0; i < len(q); i++ {
			c := q[i]
			switch {
			case c == '\\':
				if i++; i == len(q) || q[i] < 32 || q[i] > 126 {
					return false
				}
			case c == '"' || c < 32 || c > 126:
				return false
			}
		}
		return true
	}
	if s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".!#$%&'*+/=?^_`{|}~-", c) >= 0) {
			return false
		}
	}
	return true
}

// validDomain accepts a lower-case host name of at least two labels whose
// last label is alphabetic (or an IDNA xn-- label): no IP literals. An
// international domain (münchen.de) is checked in its ASCII form
// (xn--mnchen-3ya.de), as IDNA's lookup profile converts it.
func validDomain(s string) bool {
	if !isASCII(s) {
		a, err := idna.Lookup.ToASCII(s)
		if err != nil {
			return false
		}
		s = a
	}
	if len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	if len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if len(l) == 0 || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			if c := l[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	tld := labels[len(labels)-1]
	if strings.HasPrefix(tld, "xn--") {
		return true
	}
	if len(tld) < 2 {
		return false
	}
	for i := 0; i < len(tld); i++ {
		if tld[i] < 'a' || tld[i] > 'z' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// validReading reports whether s matches the reference's pattern for a
// reading value, ^-?\d{0,10}(?:\.\d{0,10})?$, with at least one digit: the
// pattern alone would take "", "-" and "." too, which are no number (the
// reference reads the value as a decimal). Leading zeros, ".5" and "5."
// are readings.
func validReading(s string) bool {
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	return len(whole) <= 10 && len(frac) <= 10 && len(whole)+len(frac) > 0 &&
		allDigits(whole) && allDigits(frac)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
