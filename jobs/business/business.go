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
	CodeAlreadyExists         = "business_already_exists"
	CodeContractAlreadyExists = "business_contract_already_exists"
	CodeSupplierNotFound      = "import_supplier_not_found"
	CodeDetailsDuplicateKeys  = "details_have_duplicate_keys"
)

// Request is the body of E1, as far as the schema could bind it.
type Request struct {
	ImportSupplierCode         string    `json:"import_supplier_code"`
	ExternalBusinessIdentifier string    `json:"external_business_identifier"`
	Business                   *Business `json:"business"`
}

// Business is the business of an E1 request (spec 2.6).
type Business struct {
	// BusinessType, CompanyNumber and CompanyName are nil when omitted;
	// each is stored as "" then.
	BusinessType      *string    `json:"business_type,omitzero"`
	CompanyNumber     *string    `json:"company_number,omitzero"`
	CompanyName       *string    `json:"company_name,omitzero"`
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
	ValidFromDate *validate.Date `json:"valid_from_date,omitzero"`
	SignedAtDate  *validate.Date `json:"signed_at_date,omitzero"`
	Identifier    string         `json:"identifier"`
	Versions      []Version      `json:"versions"`
}

// Version is the contract's terms from ApplicableAtDate on.
type Version struct {
	ApplicableAtDate *validate.Date `json:"applicable_at_date,omitzero"`
	// Terms is the JSON array as sent, compacted; nil when omitted.
	Terms json.RawMessage `json:"terms,omitzero"`
}

// Result is the answer of a successful E1 call (201).
type Result struct {
	ServiceBusinessID          int64  `json:"service_business_id"`
	ExternalBusinessIdentifier string `json:"external_business_identifier"`
}
