package account

import (
	"regexp"
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
	num, err := phonenumbers.Parse(s, region)
	if err != nil {
		return s, phoneInvalid
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
		if ld := leadingDigits[r]; ld != nil {
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
		p := nonGeoPatterns[cc]
		return p != nil && p().valid(nsn)
	}
	p := regionPatternsByID[region]
	return p != nil && cc == phonenumbers.GetCountryCodeForRegion(region) && p().valid(nsn)
}

// nonGeoRegion is the library's region code for the calling codes of no
// country (+800, +882, ...), each with metadata of its own.
const nonGeoRegion = "001"

// regionPatterns are one region's number patterns, compiled once. The
// library's own check (isNumberMatchingDesc, under IsValidNumberForRegion)
// builds each anchored pattern by string concatenation at every call, looks
// it up in a mutex-guarded cache and matches it twice; that was most of a
// valid number's cost after Parse, and a third of validation's allocations.
type regionPatterns struct {
	general descPattern
	// types are the number types getNumberTypeHelper tries after the
	// general pattern: premium rate, toll free, shared cost, VoIP, personal,
	// pager, UAN, voicemail, fixed line, and mobile unless its pattern is the
	// fixed line's. A number is valid when the general pattern and any of
	// them match; which one decides only the type, which is not asked.
	types []descPattern
}

// descPattern is one PhoneNumberDesc: the number matches when its length is
// one of lengths (any, when there are none) and the whole of it matches re.
type descPattern struct {
	lengths []int32
	re      *regexp.Regexp
}

func (d descPattern) matches(nsn string) bool {
	if len(d.lengths) > 0 {
		ok := false
		for _, l := range d.lengths {
			if int(l) == len(nsn) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
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
	descs := []*phonenumbers.PhoneNumberDesc{
		md.GetPremiumRate(), md.GetTollFree(), md.GetSharedCost(), md.GetVoip(), md.GetPersonalNumber(),
		md.GetPager(), md.GetUan(), md.GetVoicemail(), md.GetFixedLine(),
	}
	if !md.GetSameMobileAndFixedLinePattern() {
		descs = append(descs, md.GetMobile())
	}
	p := &regionPatterns{general: compileDesc(md.GetGeneralDesc())}
	for _, d := range descs {
		if d.GetNationalNumberPattern() == "" {
			continue // matches nothing; see compileDesc
		}
		p.types = append(p.types, compileDesc(d))
	}
	return p
}

// regionPatternsByID and nonGeoPatterns compile a region's patterns on
// first use: a service sees a few regions, and compiling all of them would
// cost every start-up about a tenth of a second.
var regionPatternsByID, nonGeoPatterns, leadingDigits = func() (map[string]func() *regionPatterns, map[int]func() *regionPatterns, map[string]*regexp.Regexp) {
	coll, err := phonenumbers.MetadataCollection()
	if err != nil {
		panic("account: phone number metadata: " + err.Error())
	}
	byID := map[string]func() *regionPatterns{}
	nonGeo := map[int]func() *regionPatterns{}
	// leadingDigits holds, for each region whose metadata has leading
	// digits, the anchored pattern GetRegionCodeForNumber matches them with.
	ld := map[string]*regexp.Regexp{}
	for _, md := range coll.GetMetadata() {
		compile := sync.OnceValue(func() *regionPatterns { return compileRegion(md) })
		if md.GetId() == nonGeoRegion {
			nonGeo[int(md.GetCountryCode())] = compile
			continue
		}
		byID[md.GetId()] = compile
		if l := md.GetLeadingDigits(); l != "" {
			ld[md.GetId()] = regexp.MustCompile("^(?:" + l + ")")
		}
	}
	return byID, nonGeo, ld
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
