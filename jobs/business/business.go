// Package business is E1: creating a business with its details and all its
// business contracts, each with its versions and terms, from one request and
// in one PostgreSQL transaction. Staged accounts later reference a contract
// by its identifier (business.business_contract_identifier), which is why
// contract identifiers are unique per import supplier.
//
// The request's fields and every rule are listed in RULES.md, which
// TestRulesFile keeps in step with the code.
package business

import (
	"encoding/json"

	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Business types: a closed set. The spec shows LTD in use; the others are the
// legal forms a UK energy supplier bills.
const (
	TypeLTD         = "LTD"         // private limited company
	TypePLC         = "PLC"         // public limited company
	TypeLLP         = "LLP"         // limited liability partnership
	TypeSoleTrader  = "SOLE_TRADER" // one person trading in their own name
	TypePartnership = "PARTNERSHIP" // ordinary partnership
	TypeCharity     = "CHARITY"     // charity or charitable incorporated organisation
)

// registeredTypes are the types registered at Companies House, which have a
// company number; company_number is required for them.
var registeredTypes = []string{TypeLTD, TypePLC, TypeLLP}

// Codes of E1 answers. Each is stable: callers branch on them.
const (
	// CodeFailedValidation is the top-level code of a refused request; the
	// individual problems are in the error's Errors.
	CodeFailedValidation = "business_failed_validation"
	// CodeParseError is the top-level code for a body that is not JSON or
	// not a JSON object; it carries no field problems.
	CodeParseError = validate.CodeParseError
	// CodeAlreadyExists refuses a business that was created before. The
	// answer carries service_business_id, so that a client that lost its 201
	// can recover the id.
	CodeAlreadyExists          = "business_already_exists"
	CodeContractAlreadyExists  = "business_contract_already_exists"
	CodeSupplierNotFound       = "import_supplier_not_found"
	CodeDetailsDuplicateKeys   = "details_have_duplicate_keys"
	CodeVersionDateNotUnique   = "duplicate_applicable_at_date"
	CodeVersionBeforeValidFrom = "applicable_at_date_before_valid_from_date"
	CodeSignedInFuture         = "signed_at_date_in_future"
)

// Request is the body of E1, as far as the schema could bind it.
type Request struct {
	ImportSupplierCode         string    `json:"import_supplier_code"`
	ExternalBusinessIdentifier string    `json:"external_business_identifier"`
	Business                   *Business `json:"business"`
}

// Business is the business of an E1 request (spec 2.6).
type Business struct {
	BusinessType string `json:"business_type"`
	// CompanyNumber is nil when omitted; it is stored as "" then.
	CompanyNumber     *string    `json:"company_number,omitzero"`
	CompanyName       string     `json:"company_name"`
	Details           []Detail   `json:"details,omitzero"`
	BusinessContracts []Contract `json:"business_contracts"`
}

// Detail is one caller-defined key/value pair about the business.
type Detail struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Contract is one business contract. Accounts of the business reference it
// by Identifier.
type Contract struct {
	ValidFromDate validate.Date  `json:"valid_from_date"`
	SignedAtDate  *validate.Date `json:"signed_at_date,omitzero"`
	Identifier    string         `json:"identifier"`
	Versions      []Version      `json:"versions"`
}

// Version is the contract's terms from ApplicableAtDate on.
type Version struct {
	ApplicableAtDate validate.Date `json:"applicable_at_date"`
	// Terms is the JSON array as sent, compacted.
	Terms json.RawMessage `json:"terms"`
}

// Result is the answer of a successful E1 call (201).
type Result struct {
	ServiceBusinessID          int64  `json:"service_business_id"`
	ExternalBusinessIdentifier string `json:"external_business_identifier"`
}
