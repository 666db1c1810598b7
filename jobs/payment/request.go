package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// Instruction types the vendors in use store. The type is an open code
// (validate.OpenCode): the spec shows CARD "in use", an example, not the
// whole set, and the vendor, asked about the instruction, says whether the
// type is right (payment_instruction_type_mismatch).
const (
	TypeCard        = "CARD"
	TypeDirectDebit = "DIRECT_DEBIT"
)

// String length limits.
const (
	maxCode      = 128 // supplier codes, account numbers, business identifiers
	maxVendor    = 64  // as vendor names are configured
	maxReference = 512 // the reference's maxLength of reference (6.6)
)

// maxAccounts bounds E2's accounts: the service's own limit (the spec shows
// none), far above a real business's accounts; the rest of the array is
// never built (validate.MaxItems).
const maxAccounts = 10000

// AccountRequest is the body of E9.
type AccountRequest struct {
	ImportSupplier        string `json:"import_supplier"`
	ExternalAccountNumber string `json:"external_account_number"`
	Vendor                string `json:"vendor"`
	Reference             string `json:"reference"`
	Type                  string `json:"type"`
}

// BusinessRequest is the body of E2.
type BusinessRequest struct {
	ImportSupplierCode         string       `json:"import_supplier_code"`
	ExternalBusinessIdentifier string       `json:"external_business_identifier"`
	Vendor                     string       `json:"vendor"`
	Reference                  string       `json:"reference"`
	Type                       string       `json:"type"`
	Accounts                   []AccountRef `json:"accounts"`
}

// AccountRef names one account of a business's instruction.
type AccountRef struct {
	ExternalAccountNumber string `json:"external_account_number"`
}

var (
	vendorNote    = "The name of a vendor the operator configured (`importctl vendor list`); case-sensitive."
	referenceNote = "The instruction's reference at the vendor. The vendor is asked whether it exists."
	typeNote      = "Must also be the type the vendor stores for the instruction."
)

var accountRequestSchema = v.NewObject(
	v.Req("import_supplier", v.StringValue, func(r *AccountRequest) *string { return &r.ImportSupplier }, v.MaxLength(maxCode),
		v.Codes(CodeSupplierNotFound)),
	v.Req("external_account_number", v.StringValue, func(r *AccountRequest) *string { return &r.ExternalAccountNumber }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound), v.Note("The account must have been imported (E5).")),
	v.Req("vendor", v.StringValue, func(r *AccountRequest) *string { return &r.Vendor }, v.MaxLength(maxVendor),
		v.Codes(CodeVendorNotFound), v.Note(vendorNote)),
	v.Req("reference", v.StringValue, func(r *AccountRequest) *string { return &r.Reference }, v.MaxLength(maxReference),
		v.Codes(CodeAlreadyExists, CodeNotFoundAtVendor), v.Note(referenceNote)),
	v.Req("type", v.StringValue, func(r *AccountRequest) *string { return &r.Type }, v.OpenCode(),
		v.Codes(CodeTypeMismatch), v.Note(typeNote)),
)

var accountRefSchema = v.NewObject(
	v.Req("external_account_number", v.StringValue, func(a *AccountRef) *string { return &a.ExternalAccountNumber }, v.MaxLength(maxCode),
		v.Codes(CodeAccountNotFound, CodeAccountNotInBusiness, CodeDuplicateAccount)),
)

var businessRequestSchema = v.NewObject(
	v.Req("import_supplier_code", v.StringValue, func(r *BusinessRequest) *string { return &r.ImportSupplierCode }, v.MaxLength(maxCode),
		v.Codes(CodeSupplierNotFound)),
	v.Req("external_business_identifier", v.StringValue, func(r *BusinessRequest) *string { return &r.ExternalBusinessIdentifier },
		v.MaxLength(maxCode), v.Codes(CodeBusinessNotFound)),
	v.Req("vendor", v.StringValue, func(r *BusinessRequest) *string { return &r.Vendor }, v.MaxLength(maxVendor),
		v.Codes(CodeVendorNotFound), v.Note(vendorNote)),
	v.Req("reference", v.StringValue, func(r *BusinessRequest) *string { return &r.Reference }, v.MaxLength(maxReference),
		v.Codes(CodeAlreadyExists, CodeNotFoundAtVendor), v.Note(referenceNote)),
	v.Req("type", v.StringValue, func(r *BusinessRequest) *string { return &r.Type }, v.OpenCode(),
		v.Codes(CodeTypeMismatch), v.Note(typeNote)),
	v.List("accounts", accountRefSchema, func(r *BusinessRequest) *[]AccountRef { return &r.Accounts }, v.Required(),
		v.MaxItems(maxAccounts), v.Note("At least one. Each account must be imported and belong to the business through its business contract.")),
)

// ParseAccountRequest decodes and checks the body of E9 as far as the
// request alone allows. It returns the request, bound as far as it could be,
// and every problem; a body that is not a JSON object gives a parse_error.
func ParseAccountRequest(body []byte) (AccountRequest, problem.List, *problem.Error) {
	// A context that is never cancelled leaves the body's own refusal as
	// the only failure.
	r, errs, err := parseAccountRequest(context.Background(), body)
	perr, _ := problem.As(err)
	return r, errs, perr
}

// parseAccountRequest is ParseAccountRequest for a request: it also fails
// when the request's client hung up, stopping between its phases
// (validate.Checkpoint) with an error that wraps ctx's.
func parseAccountRequest(ctx context.Context, body []byte) (AccountRequest, problem.List, error) {
	var r AccountRequest
	var w v.Walker
	if _, err := accountRequestSchema.Decode(ctx, body, &w, &r); err != nil {
		return r, nil, fmt.Errorf("payment: %w", err)
	}
	return r, w.Errors, nil
}

// ParseBusinessRequest decodes and checks the body of E2, as
// ParseAccountRequest does for E9.
func ParseBusinessRequest(body []byte) (BusinessRequest, problem.List, *problem.Error) {
	r, errs, err := parseBusinessRequest(context.Background(), body)
	perr, _ := problem.As(err)
	return r, errs, perr
}

// parseBusinessRequest is ParseBusinessRequest for a request, as
// parseAccountRequest is for E9.
func parseBusinessRequest(ctx context.Context, body []byte) (BusinessRequest, problem.List, error) {
	var r BusinessRequest
	var w v.Walker
	if _, err := businessRequestSchema.Decode(ctx, body, &w, &r); err != nil {
		return r, nil, fmt.Errorf("payment: %w", err)
	}
	if r.Accounts != nil && len(r.Accounts) == 0 {
		w.AddAt("accounts", v.CodeRequired, "At least one account is required.")
	}
	// Repeats is linear; a pairwise comparison let one request with many
	// accounts hold a CPU for minutes.
	for _, i := range v.Repeats(r.Accounts, func(a *AccountRef) string { return a.ExternalAccountNumber }) {
		w.AddAt(v.Attr("accounts", i, "external_account_number"), CodeDuplicateAccount, "Account %s is listed more than once.", r.Accounts[i].ExternalAccountNumber)
	}
	return r, w.Errors, nil
}

// peekSupplierCode returns the string value of the first top-level
// "import_supplier_code" member of body, reading no further than it, so
// that the supplier can be checked before any per-account work. ok is false
// when body is not an object or has no such string member.
func peekSupplierCode(body []byte) (code string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		if key, _ := t.(string); key == "import_supplier_code" {
			err := dec.Decode(&code)
			return code, err == nil
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}
