package account

import (
	"bytes"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/nyaruka/phonenumbers"
)

type phoneResult uint8

const (
	phoneValid     phoneResult = iota
	phoneInvalid               // not a number we accept
	phoneUnchecked             // a national number while the country is unknown
)

// normalisePhone checks a phone number, reading national numbers in region
// (the supplier's country; "" when unknown), and returns it in E.164. Any
// valid number is accepted, whatever its type: the reference checks only
// that a number "conforms to the norms of the region" (section 6.3), and its
// own examples give mobiles in national form (07123456789, 0488008221).
func normalisePhone(s, region string) (string, phoneResult) {
	international := strings.HasPrefix(strings.TrimSpace(s), "+")
	if !international && region == "" {
		return s, phoneUnchecked
	}
	num, ok := parseSimplePhone(s, region)
	if !ok {
		var err error
		if num, err = phonenumbers.Parse(s, region); err != nil {
			return s, phoneInvalid
		}
	}
	if !validPhone(num, region) {
		return s, phoneInvalid
	}
	return withExtension(s, num), phoneValid
}

// validPhone reports whether num is valid for region, the supplier's
// country ("" when unknown), or valid at all:
//
//	IsValidNumberForRegion(num, region) || IsValidNumber(num)
//
// with fewer passes over the library's patterns, each pass cheaper. A pass
// over one region's patterns (regionPatterns.valid) tries the number against
// each number type's pattern. For a number of the supplier's own country,
// IsValidNumberForRegion decides in one pass where IsValidNumber makes two
// (one to find the region among those sharing the calling code, such as
// GB, GG, IM and JE for +44, one for the type). For a number of another
// region of the same calling code (a Guernsey mobile, +44 7911, for a GB
// supplier), IsValidNumber after it would make the supplier region's pass
// again, then the number's region's twice: validPhone walks the regions of
// the calling code as IsValidNumber does (GetRegionCodeForNumber: the first
// region whose leading digits match, or, for one without leading digits,
// whose patterns match), skips the pass already made, and lets the pass that
// found a region answer for it. TestValidPhone_AsLibrary and FuzzValidPhone
// hold it to the expression above.
func validPhone(num *phonenumbers.PhoneNumber, region string) bool {
	cc := int(num.GetCountryCode())
	nsn := phonenumbers.GetNationalSignificantNumber(num)
	triedRegion := region != "" && cc == phonenumbers.GetCountryCodeForRegion(region)
	if triedRegion && validForRegion(nsn, cc, region) {
		return true
	}
	regions := phonenumbers.GetRegionCodesForCountryCode(cc)
	switch len(regions) {
	case 0:
		return false
	case 1:
		// GetRegionCodeForNumber names the only region without a pass.
		return validForRegion(nsn, cc, regions[0])
	}
	for _, r := range regions {
		if ld := phoneRegions[r].leadingDigits(); ld != nil {
			if ld.MatchString(nsn) {
				return r != region && validForRegion(nsn, cc, r)
			}
			continue
		}
		// A region without leading digits is the number's region when its
		// pass finds a type, and validForRegion is that pass.
		if r == region && triedRegion {
			continue // its pass failed above
		}
		if validForRegion(nsn, cc, r) {
			return true
		}
	}
	return false
}

// validForRegion is phonenumbers.IsValidNumberForRegion for a number of
// calling code cc whose national significant number is nsn.
func validForRegion(nsn string, cc int, region string) bool {
	if region == nonGeoRegion {
		r := nonGeoRegions[cc]
		return r != nil && r.patterns().valid(nsn)
	}
	r := phoneRegions[region]
	return r != nil && cc == int(r.md.GetCountryCode()) && r.patterns().valid(nsn)
}

// nonGeoRegion is the library's region code for the calling codes of no
// country (+800, +882, ...), each with metadata of its own.
const nonGeoRegion = "001"

// phoneRegion is one region's metadata, with its patterns compiled on first
// use: a service sees a few regions, and compiling all of them would cost
// every start-up about a tenth of a second.
type phoneRegion struct {
	md       *phonenumbers.PhoneMetadata
	patterns func() *regionPatterns
	// leading is, when the metadata has leading digits, the anchored
	// pattern GetRegionCodeForNumber matches them with.
	leading *regexp.Regexp
}

// leadingDigits is r's leading-digits pattern; nil for a region without
// them, or for no region.
func (r *phoneRegion) leadingDigits() *regexp.Regexp {
	if r == nil {
		return nil
	}
	return r.leading
}

// regionPatterns are one region's patterns, compiled once. The library's
// own checks build each anchored pattern by string concatenation at every
// call, look it up in a mutex-guarded cache and, for a number type, match it
// twice (isNumberMatchingDesc, under IsValidNumberForRegion); that was most
// of a valid number's cost after Parse, and a third of validation's
// allocations.
type regionPatterns struct {
	general descPattern
	// types are the number types getNumberTypeHelper tries after the
	// general pattern: fixed line, mobile unless its pattern is the fixed
	// line's, premium rate, toll free, shared cost, VoIP, personal, pager,
	// UAN and voicemail. A number is valid when the general pattern and any
	// of them match; which one decides only the type, which is not asked.
	types []descPattern

	// What parseSimplePhone needs: the international prefix (IDD), as
	// the library matches it (unanchored, the match to start at 0); the
	// national prefix for parsing, anchored at the start, nil when the
	// region has none; and whether a transform rule goes with it.
	idd            *regexp.Regexp
	nationalPrefix *regexp.Regexp
	transform      bool
}

// descPattern is one PhoneNumberDesc: the number matches when its length is
// one of lengths (any, when there are none) and the whole of it matches re.
type descPattern struct {
	lengths []int32
	re      *regexp.Regexp
}

func (d descPattern) matches(nsn string) bool {
	if len(d.lengths) > 0 && !slices.Contains(d.lengths, int32(len(nsn))) {
		return false
	}
	return d.re.MatchString(nsn)
}

func (p *regionPatterns) valid(nsn string) bool {
	if !p.general.matches(nsn) {
		return false
	}
	for _, t := range p.types {
		if t.matches(nsn) {
			return true
		}
	}
	return false
}

func compileDesc(d *phonenumbers.PhoneNumberDesc) descPattern {
	// The library anchors the pattern so, whether or not the metadata has
	// it: an absent description has the empty pattern, which matches no
	// national significant number (there is always at least one digit).
	return descPattern{
		lengths: d.GetPossibleLength(),
		re:      regexp.MustCompile("^(?:" + d.GetNationalNumberPattern() + ")$"),
	}
}

func compileRegion(md *phonenumbers.PhoneMetadata) *regionPatterns {
	// Fixed line and mobile first: most numbers are one of them, and for
	// validity the order does not matter.
	descs := []*phonenumbers.PhoneNumberDesc{md.GetFixedLine()}
	if !md.GetSameMobileAndFixedLinePattern() {
		descs = append(descs, md.GetMobile())
	}
	descs = append(descs, md.GetPremiumRate(), md.GetTollFree(), md.GetSharedCost(), md.GetVoip(),
		md.GetPersonalNumber(), md.GetPager(), md.GetUan(), md.GetVoicemail())
	p := &regionPatterns{
		general:   compileDesc(md.GetGeneralDesc()),
		idd:       regexp.MustCompile(md.GetInternationalPrefix()),
		transform: md.GetNationalPrefixTransformRule() != "",
	}
	if np := md.GetNationalPrefixForParsing(); np != "" {
		p.nationalPrefix = regexp.MustCompile("^(?:" + np + ")")
	}
	for _, d := range descs {
		if d.GetNationalNumberPattern() == "" {
			continue // matches nothing; see compileDesc
		}
		p.types = append(p.types, compileDesc(d))
	}
	return p
}

// phoneRegions holds every region's metadata by region code, and
// nonGeoRegions that of each calling code of no country.
var phoneRegions, nonGeoRegions = func() (map[string]*phoneRegion, map[int]*phoneRegion) {
	coll, err := phonenumbers.MetadataCollection()
	if err != nil {
		panic("account: phone number metadata: " + err.Error())
	}
	byID := map[string]*phoneRegion{}
	nonGeo := map[int]*phoneRegion{}
	for _, md := range coll.GetMetadata() {
		r := &phoneRegion{md: md, patterns: sync.OnceValue(func() *regionPatterns { return compileRegion(md) })}
		if md.GetId() == nonGeoRegion {
			nonGeo[int(md.GetCountryCode())] = r
			continue
		}
		if l := md.GetLeadingDigits(); l != "" {
			r.leading = regexp.MustCompile("^(?:" + l + ")")
		}
		byID[md.GetId()] = r
	}
	return byID, nonGeo
}()

// withExtension returns num in E.164 followed, when it has an extension,
// by the extension in RFC 3966 form: "+441614960123;ext=12". E.164 alone
// cannot carry an extension, and an office number often has one. Should
// that form exceed the reference's 32 characters, the number is kept as
// sent (which fits), so that the normalised payload validates again.
func withExtension(s string, num *phonenumbers.PhoneNumber) string {
	n := phonenumbers.Format(num, phonenumbers.E164)
	if ext := num.GetExtension(); ext != "" {
		n += ";ext=" + ext
	}
	if len(n) > maxPhone {
		return s
	}
	return n
}

// parseSimplePhone is phonenumbers.Parse(s, region) for the forms numbers
// are usually sent in: ASCII digits in groups of one space, after an
// optional +: "+447911123456", "+44 7911 123456", "0161 496 0123". It
// answers ok=false for anything else, and for any case below that it
// leaves to Parse, whose answer the caller then takes.
//
// For these forms most of Parse is no work: no extension form can match
// (each needs a label, ";", "," or "#"), nor an RFC 3966 context, and
// normalising drops the spaces. Yet Parse runs its extension pattern, a
// large case-insensitive alternation, over every input, twice: alone, and
// inside the pattern of viable numbers. That was most of Parse's time. What
// is left is done here in the library's order, with the region's patterns
// compiled once: the calling code after a +, or the supplier region's
// (leaving to Parse a number that starts with the region's international
// prefix or its calling code); the national prefix, stripped when what is
// left is of a possible length (leaving to Parse a region whose prefix comes
// with a transform rule); the national number's leading zeros.
// TestParseSimplePhone_AsLibrary and FuzzParseSimplePhone hold it to Parse.
func parseSimplePhone(s, region string) (*phonenumbers.PhoneNumber, bool) {
	var buf [32]byte
	digits, plus, ok := simplePhoneDigits(s, buf[:0])
	if !ok || len(digits) < 3 {
		return nil, false
	}
	var (
		md       *phonenumbers.PhoneMetadata
		p        *regionPatterns
		cc       int
		national []byte
	)
	if plus {
		if digits[0] == '0' {
			return nil, false
		}
		for i := 1; i <= 3 && cc == 0; i++ {
			n, _ := strconv.Atoi(string(digits[:i]))
			if len(phonenumbers.GetRegionCodesForCountryCode(n)) > 0 {
				cc, national = n, digits[i:]
			}
		}
		if cc == 0 {
			return nil, false
		}
		var r *phoneRegion
		if main := phonenumbers.GetRegionCodeForCountryCode(cc); main == nonGeoRegion {
			r = nonGeoRegions[cc]
		} else {
			r = phoneRegions[main]
		}
		if r == nil {
			return nil, false
		}
		md, p = r.md, r.patterns()
	} else {
		r := phoneRegions[region]
		if r == nil {
			return nil, false
		}
		md, p = r.md, r.patterns()
		if loc := p.idd.FindIndex(digits); loc != nil && loc[0] == 0 {
			return nil, false
		}
		cc = int(md.GetCountryCode())
		if bytes.HasPrefix(digits, strconv.AppendInt(nil, int64(cc), 10)) {
			return nil, false
		}
		national = digits
	}
	if len(national) < 2 || len(md.GetGeneralDesc().GetPossibleLength()) == 0 {
		return nil, false
	}
	if p.nationalPrefix != nil {
		if loc := p.nationalPrefix.FindIndex(national); loc != nil {
			if p.transform {
				return nil, false
			}
			stripped := national[loc[1]:]
			if !(p.general.re.Match(national) && !p.general.re.Match(stripped)) &&
				possibleLength(len(stripped), md.GetGeneralDesc()) {
				national = stripped
			}
		}
	}
	if len(national) < 2 || len(national) > 17 {
		return nil, false
	}
	nn, err := strconv.ParseUint(string(national), 10, 64)
	if err != nil {
		return nil, false
	}
	cc32 := int32(cc)
	num := &phonenumbers.PhoneNumber{CountryCode: &cc32, NationalNumber: &nn}
	if national[0] == '0' {
		italian := true
		num.ItalianLeadingZero = &italian
		zeros := int32(1)
		for int(zeros) < len(national)-1 && national[zeros] == '0' {
			zeros++
		}
		if zeros != 1 {
			num.NumberOfLeadingZeros = &zeros
		}
	}
	return num, true
}

// simplePhoneDigits appends the digits of s to buf when s is an optional +
// and groups of ASCII digits separated by one space each.
func simplePhoneDigits(s string, buf []byte) (digits []byte, plus, ok bool) {
	if plus = strings.HasPrefix(s, "+"); plus {
		s = s[1:]
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			buf = append(buf, c)
		case c == ' ' && i > 0 && i < len(s)-1 && s[i-1] != ' ':
		default:
			return nil, false, false
		}
	}
	return buf, plus, len(s) > 0
}

// possibleLength is the library's testNumberLength(number, metadata,
// UNKNOWN) being none of TOO_SHORT, IS_POSSIBLE_LOCAL_ONLY and
// INVALID_LENGTH: the length is a possible one of the region's numbers, or
// longer than all of them.
func possibleLength(n int, general *phonenumbers.PhoneNumberDesc) bool {
	lengths := general.GetPossibleLength() // never empty: parseSimplePhone checks
	if lengths[0] == -1 || slices.Contains(general.GetPossibleLengthLocalOnly(), int32(n)) {
		return false
	}
	return int32(n) > lengths[len(lengths)-1] || slices.Contains(lengths, int32(n))
}
