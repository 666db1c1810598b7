// Package payment is payment instructions (E2 for a business, E9 for an
// account) and the payment vendors that verify them.
//
// The API side (Service) checks what it can without the vendor, enqueues a
// payment_instruction:verify task on the vendors queue and waits for its
// outcome, as E5 does. The worker side (Verifier) asks the vendor, through
// the vendor's Adapter, whether the instruction exists, retrying
// intermittent failures a bounded number of times with backoff, and stores
// the instruction with what the vendor said about it. PostgreSQL is the
// record: an instruction exists once, by its unique indexes.
//
// The vendor protocol and every answer of E2 and E9 are in PROTOCOL.md.
package payment

import "github.com/bulkimport/bulkimport/jobs/validate"

// Codes of E2 and E9 answers. Each is stable: callers branch on them.
const (
	// CodeFailedValidation is the top-level code of a refused request; the
	// individual problems are in the error's Errors.
	CodeFailedValidation = "payment_instruction_failed_validation"
	// CodeParseError: the body is not JSON, or not a JSON object.
	CodeParseError           = validate.CodeParseError
	CodeSupplierNotFound     = "import_supplier_not_found"
	CodeAccountNotFound      = "account_not_found"
	CodeAccountNotInBusiness = "account_not_in_business"
	CodeDuplicateAccount     = "duplicate_external_account_number"
	CodeBusinessNotFound     = "business_not_found"
	CodeVendorNotFound       = "payment_vendor_not_found"
	// CodeAlreadyExists refuses a reference already stored for the account
	// (E9) or business (E2). Top-level code; the answer also carries the
	// stored instruction's keys so that a client that lost its 201 can go on.
	CodeAlreadyExists = "payment_instruction_already_exists"
	// CodeNotFoundAtVendor: the vendor answered 404. Persistent: 400.
	CodeNotFoundAtVendor = "payment_instruction_not_found_at_vendor"
	// CodeVendorRefused: the vendor refused the request with a 4xx other
	// than 404 and 429, as it will each time. Persistent: 400.
	CodeVendorRefused = "payment_vendor_refused_request"
	// CodeTypeMismatch: the vendor stores the instruction with another type.
	CodeTypeMismatch = "payment_instruction_type_mismatch"
	// CodeVendorUnavailable: intermittent failures outlasted every attempt.
	// 500; retry as is.
	CodeVendorUnavailable = "payment_vendor_unavailable"
	// CodeVendorProtocolError: the vendor's answer broke the protocol, and
	// will again. 400 (do not retry in this form); the operator is told in
	// the logs.
	CodeVendorProtocolError = "payment_vendor_protocol_error"
	// CodeVerificationUnfinished: no outcome within the wait (the worker is
	// busy or down). 500; retry as is.
	CodeVerificationUnfinished = "payment_verification_unfinished"
	// CodeQueueUnavailable: Redis refused the task. 500; nothing changed.
	CodeQueueUnavailable = "queue_unavailable"
)

// detailFailed is the top-level detail of a refused request.
const detailFailed = "Could not validate payment instruction data."

// AccountResult is the answer of a successful E9 call (201).
type AccountResult struct {
	ServiceAccountNumber string `json:"service_account_number"`
	Reference            string `json:"reference"`
}

// BusinessResult is the answer of a successful E2 call (201).
type BusinessResult struct {
	Reference                  string `json:"reference"`
	ExternalBusinessIdentifier string `json:"external_business_identifier"`
}
