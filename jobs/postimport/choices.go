package postimport

// The value sets of the three requests, all in one place.
//
// Only the transaction type is a closed set: it decides which fields a
// transaction accepts and which way its amount moves the ledger. reason,
// payment_type, line_items[].rate_band, tax_items[].tax_type and
// tax_items[].unit_type are open codes (validate.OpenCode): the spec lists
// their values "in use", which is an example, and the reference's own
// payloads use values beyond that list (PREPAY_DEBT_ADJUSTMENT, and
// GENERAL_CREDIT on a PAYMENT).

// The transaction types (spec 2.7); each decides which fields are accepted.
const (
	TypeCharge       = "CHARGE"
	TypeCredit       = "CREDIT"
	TypePayment      = "PAYMENT"
	TypeRepayment    = "REPAYMENT"
	TypeSupplyCharge = "SUPPLY_CHARGE"
)

// Status values of the answers (spec 2.7; notes' are in jobs/note).
const (
	TransactionAdded         = "TRANSACTION_ADDED_TO_ACCOUNT"
	TransactionAlreadyExists = "TRANSACTION_ALREADY_EXISTS"
	TransactionImportError   = "TRANSACTION_IMPORT_ERROR"
	TransactionImportSuccess = "TRANSACTION_IMPORT_SUCCESS"
)

// Limits on one request. The spec sets none; these keep one request to one
// reasonably short database transaction. A body is also limited by
// MAX_BODY_BYTES.
const (
	MaxNotes        = 1000
	MaxTransactions = 10000
	MaxStatements   = 1000
	// maxUnits bounds line_items[].units: generous, as the spec shows no
	// meaning for the list (a month of half-hourly values is 1,488).
	maxUnits = 10000
)

// String length limits, as in jobs/account.
const (
	maxCode       = 128 // identifiers, codes, references
	maxAccountRef = 128
	maxShortText  = 255
	maxLongText   = 2000 // display notes and internal notes
)
