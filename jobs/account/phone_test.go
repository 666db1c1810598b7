package account

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nyaruka/phonenumbers"
	"google.golang.org/protobuf/proto"
)

// validPhoneReference is what validPhone must answer, in the library's own
// calls.
func validPhoneReference(num *phonenumbers.PhoneNumber, region string) bool {
	if region != "" && int(num.GetCountryCode()) == phonenumbers.GetCountryCodeForRegion(region) &&
		phonenumbers.IsValidNumberForRegion(num, region) {
		return true
	}
	return phonenumbers.IsValidNumber(num)
}

// phoneTestRegions are the supplier countries FuzzValidPhone reads
// numbers in: none, calling codes' main regions and the others that share
// them (+44, +1, +7, +47, +358, +212: regions with leading digits, the main
// one among them for the last four, and regions without), and
// single-region codes.
var phoneTestRegions = []string{"", "GB", "GG", "IM", "JE", "US", "CA", "AG", "PR", "RU", "KZ", "NO", "SJ", "FI", "AX", "MA", "EH", "FR", "IE", "IT", "DE"}

// phoneSupportedRegions are the library's regions, in order.
func phoneSupportedRegions() []string {
	regions := make([]string, 0, 256)
	for r := range phonenumbers.GetSupportedRegions() {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	return regions
}

// phoneTestTypes are the number types whose example numbers the
// comparisons with the library start from.
var phoneTestTypes = []phonenumbers.PhoneNumberType{
	phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE, phonenumbers.PREMIUM_RATE,
	phonenumbers.SHARED_COST, phonenumbers.VOIP, phonenumbers.PERSONAL_NUMBER, phonenumbers.PAGER,
	phonenumbers.UAN, phonenumbers.VOICEMAIL,
}

// TestValidPhone_AsLibrary compares validPhone with the library's calls on
// the example number of every type of every region, and on numbers a digit
// away from each (mostly invalid, or of another type or region), each read
// with no supplier country, in its own region, in the main region of its
// calling code and in every region sharing that code (a few of +1's), and
// in GB and US.
func TestValidPhone_AsLibrary(t *testing.T) {
	t.Parallel()
	checked, valid := 0, 0
	for _, r := range phoneSupportedRegions() {
		var inputs []string
		for _, ty := range phoneTestTypes {
			ex := phonenumbers.GetExampleNumberForType(r, ty)
			if ex == nil {
				continue
			}
			e164 := phonenumbers.Format(ex, phonenumbers.E164)
			nsn := phonenumbers.GetNationalSignificantNumber(ex)
			inputs = append(inputs, e164, phonenumbers.Format(ex, phonenumbers.NATIONAL), e164[:len(e164)-1], e164+"7")
			for i := range len(nsn) {
				d := (nsn[i]-'0'+1)%10 + '0'
				inputs = append(inputs, "+"+strconv.Itoa(int(ex.GetCountryCode()))+nsn[:i]+string(d)+nsn[i+1:])
			}
		}
		cc := phonenumbers.GetCountryCodeForRegion(r)
		suppliers := []string{"", r, phonenumbers.GetRegionCodeForCountryCode(cc), "GB", "US"}
		if shared := phonenumbers.GetRegionCodesForCountryCode(cc); len(shared) <= 4 {
			suppliers = append(suppliers, shared...)
		} else {
			suppliers = append(suppliers, "CA", "AG", shared[len(shared)-1])
		}
		for _, in := range inputs {
			for _, region := range suppliers {
				num, err := phonenumbers.Parse(in, region)
				if err != nil {
					continue
				}
				want := validPhoneReference(num, region)
				if got := validPhone(num, region); got != want {
					t.Errorf("validPhone(%q read in %q) = %v, the library says %v", in, region, got, want)
				}
				checked++
				if want {
					valid++
				}
			}
		}
	}
	t.Logf("%d numbers checked, %d valid", checked, valid)
	// The inputs reach both answers, many times.
	if checked < 80_000 || valid < 10_000 || checked-valid < 10_000 {
		t.Errorf("%d numbers checked, %d valid: too few of either", checked, valid)
	}
}

// FuzzValidPhone: any text that parses as a phone number in a supplier
// country gets validPhone's answer from the library's calls too.
func FuzzValidPhone(f *testing.F) {
	for _, s := range []string{
		"+44 7911 123456", "0161 496 0123", "+44 7624 123456", "+44 7700 900123", "+1 204 555 0100",
		"+1 268 464 1234", "(201) 555-0123", "+7 701 123 4567", "+39 06 1234 5678", "+800 1234 5678",
		"+882 1234 5678", "0488008221", "+44 20 7946 0018 x7", "+999 1234",
	} {
		for i := range phoneTestRegions {
			f.Add(s, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, s string, ri uint8) {
		region := phoneTestRegions[int(ri)%len(phoneTestRegions)]
		num, err := phonenumbers.Parse(s, region)
		if err != nil {
			return
		}
		if got, want := validPhone(num, region), validPhoneReference(num, region); got != want {
			t.Fatalf("validPhone(%q read in %q) = %v, the library says %v", s, region, got, want)
		}
	})
}

// The fixture's mobiles are Guernsey numbers (+44 7911), valid for a GB
// supplier through IsValidNumber; its landlines are GB's own.
func TestValidPhone_OtherRegionOfTheCallingCode(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in, region string
		want       bool
	}{
		{"+44 7911 123456", "GB", true},
		{"0161 496 0123", "GB", true},
		{"+44 7624 123456", "GB", true}, // Isle of Man, found by its leading digits
		{"+44 7624 123456", "IM", true},
		{"+44 1624 123456", "JE", false}, // Isle of Man by its leading digits, and not valid there
		{"+44 1624 12345", "GB", false},
		{"+1 204 555 0100", "US", true}, // Canada
		{"+1 268 464 1234", "US", true}, // Antigua, leading digits 268
		{"+1 268 123 1234", "US", false},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.in, " in ", tc.region), func(t *testing.T) {
			t.Parallel()
			num, err := phonenumbers.Parse(tc.in, tc.region)
			if err != nil {
				t.Fatal(err)
			}
			if got := validPhone(num, tc.region); got != tc.want || got != validPhoneReference(num, tc.region) {
				t.Errorf("validPhone = %v, want %v (the library: %v)", got, tc.want, validPhoneReference(num, tc.region))
			}
		})
	}
}

// parseSimplePhoneTestRegions are the supplier countries parseSimplePhone
// is compared with Parse in, beside each number's own: none, an unknown
// one, and regions whose national prefixes differ (AR's comes with a
// transform rule, IT keeps its leading zero, RU's is 8, US's is 1).
var parseSimplePhoneTestRegions = []string{"", "ZZ", "GB", "US", "IT", "AR", "RU"}

// checkParseSimplePhone fails t when parseSimplePhone answers for s read
// in region and Parse does not answer the same, and reports whether it
// answered.
func checkParseSimplePhone(t testing.TB, s, region string) bool {
	t.Helper()
	got, ok := parseSimplePhone(s, region)
	if !ok {
		return false
	}
	want, err := phonenumbers.Parse(s, region)
	if err != nil {
		t.Errorf("parseSimplePhone(%q, %q) = %v, Parse fails: %v", s, region, got, err)
	} else if !proto.Equal(got, want) {
		t.Errorf("parseSimplePhone(%q, %q) = %v, Parse says %v", s, region, got, want)
	}
	return true
}

// TestParseSimplePhone_AsLibrary compares parseSimplePhone with Parse on
// every region's example numbers and numbers a digit away, written in
// E.164, spaced, in national form with and without the national prefix,
// after the international prefix and after the bare calling code, each
// read in its own region, its calling code's main region and the regions
// above.
func TestParseSimplePhone_AsLibrary(t *testing.T) {
	t.Parallel()
	spaced := func(d string) string {
		var b strings.Builder
		for i := range len(d) {
			if i > 0 && i%3 == 0 {
				b.WriteByte(' ')
			}
			b.WriteByte(d[i])
		}
		return b.String()
	}
	checked, answered, international := 0, 0, 0
	// Under -short (the race detector makes Parse slow) every third region;
	// make test-long reads them all.
	regions, least := phoneSupportedRegions(), 50_000
	if testing.Short() {
		var some []string
		for k, r := range regions {
			if k%3 == 0 {
				some = append(some, r)
			}
		}
		regions, least = some, least/3
	}
	for _, r := range regions {
		cc := strconv.Itoa(phonenumbers.GetCountryCodeForRegion(r))
		ndd := phonenumbers.GetNddPrefixForRegion(r, true)
		idd := phoneRegions[r].md.GetPreferredInternationalPrefix()
		if idd == "" {
			idd = "00"
		}
		var inputs []string
		for _, ty := range phoneTestTypes {
			ex := phonenumbers.GetExampleNumberForType(r, ty)
			if ex == nil {
				continue
			}
			nsn := phonenumbers.GetNationalSignificantNumber(ex)
			inputs = append(inputs, phonenumbers.Format(ex, phonenumbers.INTERNATIONAL), phonenumbers.Format(ex, phonenumbers.NATIONAL))
			for _, v := range []string{nsn, nsn[:len(nsn)-1], nsn + "7", nsn[1:], "0" + nsn, "00" + nsn} {
				inputs = append(inputs, "+"+cc+v, "+"+cc+" "+spaced(v), v, spaced(v), ndd+v, ndd+" "+spaced(v), cc+v, idd+cc+v, idd+" "+cc+" "+v)
			}
			for i := range len(nsn) {
				v := nsn[:i] + string((nsn[i]-'0'+1)%10+'0') + nsn[i+1:]
				inputs = append(inputs, "+"+cc+v, v, ndd+v)
			}
		}
		suppliers := append([]string{r, phonenumbers.GetRegionCodeForCountryCode(phonenumbers.GetCountryCodeForRegion(r))}, parseSimplePhoneTestRegions...)
		for _, in := range inputs {
			for _, region := range suppliers {
				checked++
				if checkParseSimplePhone(t, in, region) {
					answered++
					if strings.HasPrefix(in, "+") {
						international++
					}
				}
			}
		}
	}
	t.Logf("%d inputs read, %d answered without Parse, %d of them international", checked, answered, international)
	// Both forms take the short way many times, and many are left to Parse.
	if answered < least || international < least*2/5 || answered-international < least*2/5 || checked-answered < least {
		t.Errorf("%d inputs read, %d answered without Parse, %d of them international: too few of some", checked, answered, international)
	}
}

// FuzzParseSimplePhone: whatever parseSimplePhone answers, Parse answers
// the same.
func FuzzParseSimplePhone(f *testing.F) {
	for _, s := range []string{
		"+44 7911 123456", "+447911123457", "0161 496 0123", "020 7946 0018", "07911 123456", "+39 06 1234 5678",
		"06 1234 5678", "011 54 9 11 1234 5678", "0011 1234", "8 701 123 4567", "44 20 7946 0018", "+800 1234 5678",
		"+0 123", "12", "1 2 3", "+1 2", "0 0 0 0",
	} {
		for i := range parseSimplePhoneTestRegions {
			f.Add(s, uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, s string, ri uint8) {
		checkParseSimplePhone(t, s, parseSimplePhoneTestRegions[int(ri)%len(parseSimplePhoneTestRegions)])
	})
}

// BenchmarkNormalisePhone checks the fixture's four numbers for a GB
// supplier the service's way and, alternately in the same loop, by the
// library's own calls for the same answers (Parse, the validity test
// validPhone stands for, Format). It prints each one's time for the four
// and their ratio, vs-library.
func BenchmarkNormalisePhone(b *testing.B) {
	in := []string{"+44 7911 123456", "0161 496 0123", "020 7946 0018", "+447911123457"}
	var service, library time.Duration
	n := 0
	for b.Loop() {
		start := time.Now()
		for _, s := range in {
			if _, r := normalisePhone(s, "GB"); r != phoneValid {
				b.Fatal(s)
			}
		}
		mid := time.Now()
		for _, s := range in {
			num, err := phonenumbers.Parse(s, "GB")
			if err != nil || !validPhoneReference(num, "GB") {
				b.Fatal(s)
			}
			phonenumbers.Format(num, phonenumbers.E164)
		}
		service += mid.Sub(start)
		library += time.Since(mid)
		n++
	}
	b.ReportMetric(float64(service.Nanoseconds())/float64(n), "service-ns")
	b.ReportMetric(float64(library.Nanoseconds())/float64(n), "library-ns")
	b.ReportMetric(float64(service)/float64(library), "vs-library")
}
