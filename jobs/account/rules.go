package account

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Top-level codes of a refused payload.
const (
	// CodeFailedValidation is the top-level code when any field is wrong;
	// the individual problems are in the error's Errors.
	CodeFailedValidation = "account_failed_validation"
	// CodeParseError is the top-level code for a body that is not JSON or
	// not a JSON object; it carries no field problems.
	CodeParseError = validate.CodeParseError
)

// The codes of rules that look across fields or outside the payload. Each
// is stable: callers branch on them.
const (
	CodeSupplierNotFound          = "import_supplier_not_found"
	CodeInvalidPhoneNumber        = "invalid_phone_number"
	CodeInvalidEmail              = "invalid_email"
	CodeTestEmail                 = "possible_test_email_address"
	CodeInvalidCountry            = "invalid_country"
	CodeInvalidPostcode           = "invalid_postcode"
	CodeAgreementBeforeSupply     = "agreement_start_date_before_supply_start_date"
	CodeAgreementOverlap          = "gaps_or_overlaps_in_agreement_dates"
	CodeTariffNotFound            = "tariff_code_not_found"
	CodeCustomerWithUnknown       = "customer_with_unknown_occupier"
	CodeMetadataDuplicateKeys     = "metadata_has_duplicate_keys"
	CodeDuplicateMeterSerial      = "duplicate_meter_serial_number"
	CodeDuplicateSupplyIdentifier = "duplicate_supply_point_identifier"
	CodeContractNotFound          = "business_contract_not_found"
	CodeSupplyTypeNotRecognised   = "supply_type_not_recognised"
	CodeMeterPointWithNoAgreement = "meter_point_with_no_agreement"
	CodeNoAgreementCoversBilled   = "no_agreement_covering_last_billed_to_date"
	CodeFutureSupplyStartDate     = "future_supply_start_date"
	CodeOccupierManyAddresses     = "occupier_account_with_multiple_supply_addresses"
)

// rule is one row of the semantic part of RULES.md.
type rule struct {
	code string
	at   string // where the problem is reported
	text string
}

// semanticRules documents every rule of validator.go that the schema cannot
// express. TestRules_EverySemanticCodeIsTested fails when a code here has no
// test case, and the reverse mistake (a code reported but not listed) fails
// TestValidate_ReportedCodesAreDocumented.
var semanticRules = append([]rule{
	{CodeCustomerWithUnknown, "`customers`", "`unknown_occupier: true` means nobody is known at the account, so `customers` must be omitted or empty. Source: reference 6.1 (`customer_with_unknown_occupier`)."},
	{CodeOccupierManyAddresses, "`supply_addresses`", "`unknown_occupier: true` allows at most one supply address. Source: reference 6.1 (`occupier_account_with_multiple_supply_addresses`: \"at most one supply address\")."},
	{CodeSupplierNotFound, "`import_supplier`", "The import supplier exists and the caller's key may use it. A supplier the key may not use looks exactly like a missing one. While the supplier is unknown, rules that need its country are skipped for national-format phone numbers and supply postcodes (international numbers are still checked), and the business contract is not looked up: an error there could be wrong, and the caller will hear about it once the supplier code is fixed. Source: spec 2.1 and reference 6.1 (`import_supplier` is one of the tenant's supplier codes)."},
	{CodeInvalidPhoneNumber, "`customers[].mobile`, `customers[].landline`, `customers[].alternative_phone_numbers[].phone_number`", "A valid phone number, of any type (a landline number is accepted as `mobile`): national numbers are read in the supplier's country, numbers with a leading + may be of any country. An empty string is accepted, and null for `mobile` and `landline`. Valid numbers are normalised to E.164 (`+447700900123`); a number with an extension (`0161 496 0123 ext. 12`) keeps it in RFC 3966 form, `+441614960123;ext=12`, unless that form would exceed 32 characters, when the number is kept as sent. Source: spec 2.2.2 and reference 6.3 (\"conforms to the norms of the region from which the migration is taking place\"; detail `<value> is not a valid phone number`)."},
	{CodeInvalidEmail, "`customers[].email`", "A mailbox in any form of RFC 5321: a local part of at most 64 characters, either a dot-atom or a quoted string (`\"amelia hughes\"@example.com`); a domain of at least two labels with a top-level domain of letters, which may be international (`müller-bäckerei.de`, checked in its IDNA ASCII form); 254 characters in all. An empty string is accepted. The domain is lower-cased. Source: reference 6.3 (`email` has format email)."},
	{CodeTestEmail, "`customers[].email`", "Refused when the address " + testEmailRule() + ". Source: reference 6.3."},
	{CodeInvalidCountry, "`billing_address.country`", "An ISO 3166-1 alpha-2 code (officially assigned). Lower case is accepted and upper-cased. Source: spec 2.2.1 and reference 6.2."},
	{CodeInvalidPostcode, "`billing_address.postal_code`, `supply_addresses[].supply_postcode`", "Checked against the postcode format of the country: the billing address's own country for `postal_code`, the supplier's country for `supply_postcode`. Countries with a format: " + postcodeCountryList() + "; for them the postcode is normalised (UK: upper case, one space before the inward code, `SW1A 1AA`). Other countries accept any text. An empty `postal_code` is accepted. Source: reference 6.2 (\"Validate and normalize postcode\")."},
	{CodeAgreementBeforeSupply, "`supply_addresses[].supply_points[].agreements[].effective_from`", "Not before the supply point's `supply_start_date`. Source: reference 6.4."},
	{CodeAgreementOverlap, "`supply_addresses[].supply_points[].agreements[].effective_from`", "Agreements of one supply point follow each other: each starts on a different date (reported at the second agreement with a date already used). An agreement runs until the next one starts, so distinct dates leave neither gaps nor overlaps. Agreements are sorted by `effective_from` in the normalised payload. Source: reference 6.1 and 6.4."},
	{CodeSupplyTypeNotRecognised, "`supply_addresses[].supply_points[].supply_type`", "The supply type is in the catalogue: the five of spec 2.2.4 (ELECTRICITY, HEAT_PUMP, LIGHT, POLE, WATER_HEATER) from the start, and those the operator adds with `importctl supply-type add`. E3 and E4 check it; E5 does not look again, as types are never removed. Source: reference 6.4 and 9 (`supply_type_not_recognised`) and spec 1 rule 6 (only documented fields, which an unknown type cannot have)."},
	{CodeMeterPointWithNoAgreement, "`supply_addresses[].supply_points[].agreements`", "Every supply point has at least one agreement (an empty list has none). Every supply point is billable: the spec gives a supply point no end of supply nor any other state off supply, and the reference's meter points include every supply type of the spec; docs/decisions.md argues the reading. Source: reference 6.1 (\"all billable meter points covered by agreements\", `meter_point_with_no_agreement`)."},
	{CodeNoAgreementCoversBilled, "`supply_addresses[].supply_points[].last_billed_to_date`", "A supply point billed up to a day has an agreement in force on that day: its earliest `effective_from` is on or before `last_billed_to_date` (an agreement starts on its `effective_from` and runs until the next one starts, the latest without end). A supply point without agreements gets `meter_point_with_no_agreement` alone. Source: reference 6.1 (\"agreements must cover `last_billed_to_date`\", `no_agreement_covering_last_billed_to_date`) and 6.4 (`effective_from` inclusive)."},
	{CodeFutureSupplyStartDate, "`supply_addresses[].supply_points[].supply_start_date`", "Not after today, dated in the supplier's time zone (UTC unless the operator set one). Source: reference 9 (`future_supply_start_date`)."},
	{CodeTariffNotFound, "`supply_addresses[].supply_points[].agreements[].tariff_code`", "The tariff exists in the product catalogue. All codes of a payload are looked up at once. Source: reference 6.4."},
	{CodeDuplicateSupplyIdentifier, "`supply_addresses[].supply_points[].identifier`", "An ELECTRICITY identifier appears once in the account (reported at the second occurrence). Source: reference 6.4 (`identifier` is \"the unique identifier for the supply point\")."},
	{CodeDuplicateMeterSerial, "`supply_addresses[].supply_points[].meters[].serial_number`", "A meter serial number appears once in its supply point (reported at the second occurrence). The same serial on two supply points of the account is accepted: a GB smart meter with an import and an export MPAN is one meter on two supply points, as the reference's own codes show (`import_meter_not_found_for_export_meter`, reference 9). Source: storage, which keys a meter by supply point and serial number (at a supply point, readings and industry flows identify a meter by its serial)."},
	{validate.CodeInvalid, "`supply_addresses[].supply_points[].transfer_readings[].value`", "A decimal number written as a string, as the reference's pattern `^-?\\d{0,10}(?:\\.\\d{0,10})?$` has it, with at least one digit: an optional minus sign, at most 10 digits before the point and at most 10 after it (so at most 22 characters, the field's `max_length`). Leading zeros (`\"00512.5\"`), `\".5\"` and `\"5.\"` are readings; an exponent, a plus sign or spaces are not. The value is kept as sent. Source: reference 6.4 (`reading_value` pattern)."},
	{CodeMetadataDuplicateKeys, "`metadata[].key`", "Each key appears once (reported at the second occurrence). Source: reference 6.1."},
	{CodeContractNotFound, "`business.business_contract_identifier`", "A business contract with this identifier was created (E1) for the same import supplier. Source: spec 2.2."},
}, slices.Concat(noteRules(), statementRules(), ledgerRules())...)

// noteRules are the note rules of jobs/note, in the same words as in
// jobs/postimport/RULES.md.
func noteRules() []rule {
	out := make([]rule, len(note.Rules))
	for i, r := range note.Rules {
		out[i] = rule{r.Code, r.At, r.Row()}
	}
	return out
}

// statementRules are the rules of one historical statement that E8 checks
// too, in the same words as in jobs/postimport/RULES.md.
func statementRules() []rule {
	out := make([]rule, len(postimport.StatementItemRules))
	for i, r := range postimport.StatementItemRules {
		out[i] = rule{r.Code, "`statements[]." + r.Field + "`", r.Text}
	}
	return out
}

// Reference returns RULES.md: the field table generated from the schema,
// then the semantic rules.
func Reference() string {
	var b strings.Builder
	b.WriteString(`# Account payload rules

<!-- Generated by TestRulesFile from jobs/account (schema.go, rules.go). Do not edit by hand:
     change the code and run go test ./jobs/account -run TestRulesFile -update -->

**The principle.** The service refuses only what the interface spec or the reference API it mirrors refuses.
Where both are silent, it accepts the value and stores it as given. A value the spec lists "in use" is an example,
not the whole set: such fields take any code of at most 64 characters (lower case and a leading digit, as in ` + "`3PH`" + `,
included). Only where the reference refuses unknown values (a ` + "`*_not_recognised`" + ` code) are the values a catalogue, which
the operator extends: ` + "`supply_type`" + ` (` + "`importctl supply-type add`" + `). Numbers have no lower bound where no source gives one. Every rule below that refuses
data names its source (a spec section or a reference rule); a limit that only protects storage says so.

These rules apply to the account import payload (spec section 2.2) in E3 (validate), E4 (stage) and when the
worker creates the account. A refused payload gets status 400 with code ` + "`" + CodeFailedValidation + "`" + ` and one entry in
` + "`errors`" + ` per problem; every problem is reported, each at its own ` + "`attr`" + `: a dot path with zero-based indexes
(` + "`customers.0.landline`" + `). A body that is not JSON, or not a JSON object, gets code ` + "`" + CodeParseError + "`" + ` with the byte
offset of the problem in the detail, and no entries.

## Fields

Paths below write arrays as ` + "`[]`" + `. Any field not listed is refused with ` + "`unknown_field`" + ` at its own path, and a key
that appears twice in one object with ` + "`duplicate_key`" + ` at the second one. ` + "`invalid`" + ` means a wrong JSON type, or null
where null is not accepted. ` + "`null_characters_not_allowed`" + ` refuses U+0000, which storage cannot hold. Strings that
must not be blank are refused when empty or made of spaces only. Numbers are JSON numbers, exponents included, read
exactly: a decimal number written ` + "`1e2`" + ` is kept as ` + "`100`" + `, and an integer field takes any whole number however it is
written (` + "`1e2`" + ` is 100; ` + "`1.5`" + ` is ` + "`invalid`" + `). A decimal number may also be sent as a JSON string, as the reference
sends its decimals (its amounts and readings are decimal strings, reference 3.5 and 6.4, and its examples send
` + "`\"10.00\"`" + ` and ` + "`10.0`" + ` alike): an optional minus sign, digits and an optional point (` + "`\"4.0\"`" + `, ` + "`\".5\"`" + `), no exponent,
plus sign or spaces. It is read exactly and kept as the same number written plainly: the digits after the point as sent
(` + "`\"4.0\"`" + ` is ` + "`4.0`" + `), without leading zeros (` + "`\"007.25\"`" + ` is ` + "`7.25`" + `).

Sources of the field rules: ` + "`unknown_field`" + `, spec section 1 rule 6 (only documented fields); ` + "`invalid`" + `, the
types of spec section 2; ` + "`required`" + `, the reference's required fields (6.1 to 6.4); ` + "`max_length`" + `, the reference's
maxLength where it gives one (see each field), else a bound that keeps one field from carrying megabytes;
` + "`invalid_choice`" + ` on coded fields, the spec's values "in use" written as codes; ` + "`invalid_date`" + ` and
` + "`invalid_datetime`" + `, spec section 1 rule 5 (datetimes in any RFC 3339 form, stored in UTC); ` + "`duplicate_key`" + `,
` + "`null_characters_not_allowed`" + ` and ` + "`number_out_of_range`" + `, what storage can hold.

` + validate.LimitsRule + `

`)
	b.WriteString(validate.Reference(accountSchema.Spec()))
	b.WriteString("\n## Rules across fields and outside the payload\n\n| Code | Reported at | Rule |\n|---|---|---|\n")
	for _, r := range semanticRules {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.code, r.at, r.text)
	}
	return b.String()
}
