package business

import (
	"bytes"
	"encoding/json"

	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// String length limits. The spec fixes none; these bound one request's
// fields to what the platform stores, as the account payload does.
const (
	maxIdentifier = 128 // external business identifier, contract identifier
	maxName       = 255 // company name, detail key
	maxNumber     = 32  // company number
	maxValue      = 2000
)

var detailSchema = v.NewObject(
	v.Req("key", v.StringValue, func(d *Detail) *string { return &d.Key }, v.MaxLength(maxName), v.Codes(CodeDetailsDuplicateKeys)),
	v.Req("value", v.StringValue, func(d *Detail) *string { return &d.Value }, v.MaxLength(maxValue), v.AllowBlank()),
)

// termsSpec is an array of any JSON values. The validate package has no
// field kind for a free-form array, so it is a Custom field; its reference
// row is fixed up in Reference.
var termsSpec = &v.Spec{Name: "terms", MaxItems: v.DefaultMaxItems,
	Note:  "Any JSON values; the spec does not show a term's shape, so terms are stored as sent (compact JSON) and given no meaning. Optional, as no source requires it: stored as NULL when omitted, apart from a sent [].",
	Codes: []string{v.CodeInvalid, v.CodeNullCharacters, v.CodeNumberOutOfRange, v.CodeDuplicateKey}}

var versionSchema = v.NewObject(
	v.Opt("applicable_at_date", v.DateValue, func(x *Version) **v.Date { return &x.ApplicableAtDate },
		v.Note("Optional, as no source requires it (stored as NULL when omitted). Versions are kept in the order sent; neither the spec nor the reference orders them or makes their dates unique.")),
	v.Custom(termsSpec, bindTerms),
)

var contractSchema = v.NewObject(
	v.Opt("valid_from_date", v.DateValue, func(c *Contract) **v.Date { return &c.ValidFromDate },
		v.Note("Optional, as no source requires it (stored as NULL when omitted).")),
	v.Opt("signed_at_date", v.DateValue, func(c *Contract) **v.Date { return &c.SignedAtDate }),
	v.Req("identifier", v.StringValue, func(c *Contract) *string { return &c.Identifier }, v.MaxLength(maxIdentifier),
		v.Codes(CodeContractAlreadyExists), v.Note("Unique per import supplier; accounts reference it as business.business_contract_identifier.")),
	v.List("versions", versionSchema, func(c *Contract) *[]Version { return &c.Versions },
		v.Note("May be empty or omitted: no source requires a version.")),
)

var businessSchema = v.NewObject(
	v.Opt("business_type", v.StringValue, func(b *Business) **string { return &b.BusinessType }, v.OpenCode(), v.AllowBlank(),
		v.Note("LTD is in use (spec 2.6); optional, as no source requires it. Stored as empty when omitted, so \"\" is the same as omitted.")),
	v.Opt("company_number", v.StringValue, func(b *Business) **string { return &b.CompanyNumber }, v.MaxLength(maxNumber), v.AllowBlank(),
		v.Note("Optional for every business type, as no source requires it. Stored as empty when omitted, so \"\" is the same as omitted.")),
	v.Opt("company_name", v.StringValue, func(b *Business) **string { return &b.CompanyName }, v.MaxLength(maxName), v.AllowBlank(),
		v.Note("Optional, as no source requires it. Stored as empty when omitted, so \"\" is the same as omitted.")),
	v.List("details", detailSchema, func(b *Business) *[]Detail { return &b.Details }),
	v.List("business_contracts", contractSchema, func(b *Business) *[]Contract { return &b.BusinessContracts },
		v.Note("All of the business's contracts come in this one request (spec E1); may be empty or omitted, as no source requires one.")),
)

var requestSchema = v.NewObject(
	v.Req("import_supplier_code", v.StringValue, func(r *Request) *string { return &r.ImportSupplierCode }, v.MaxLength(maxIdentifier),
		v.Codes(CodeSupplierNotFound)),
	v.Req("external_business_identifier", v.StringValue, func(r *Request) *string { return &r.ExternalBusinessIdentifier },
		v.MaxLength(maxIdentifier), v.Codes(CodeAlreadyExists)),
	v.Obj("business", businessSchema, func(r *Request) **Business { return &r.Business }, v.Required()),
)

// bindTerms keeps an array of any JSON values as compact JSON, escaped the
// way encoding/json writes it, after checking what storage cannot hold.
func bindTerms(w *v.Walker, val *v.Value, dst *Version) {
	switch val.Kind {
	case v.KindNull:
		w.Add(v.CodeInvalid, "This field may not be null.")
		return
	case v.KindArray:
	default:
		w.Add(v.CodeInvalid, "Expected an array but got %s.", val.Kind)
		return
	}
	if !v.CheckFreeForm(w, val, termsSpec) {
		return
	}
	var compact, escaped bytes.Buffer
	_ = json.Compact(&compact, []byte(val.Raw)) // cannot fail: Parse accepted it
	json.HTMLEscape(&escaped, compact.Bytes())
	dst.Terms = json.RawMessage(escaped.Bytes())
}
