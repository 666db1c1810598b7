package postimport

// The closed value sets of the three requests, all in one place.
//
// As in jobs/account, each set is the values the spec shows "in use" plus
// their evident counterparts. The sets are closed on purpose: the platform's
// ledger maps each value onto its own enumerations, and a value it does not
// know must be refused at import, not discovered at the next bill run.
// Widening a set is a change to this file and RULES.md.

// The transaction types (spec 2.7); each decides which fields are accepted.
const (
	TypeCharge       = "CHARGE"
	TypeCredit       = "CREDIT"
	TypePayment      = "PAYMENT"
	TypeRepayment    = "REPAYMENT"
	TypeSupplyCharge = "SUPPLY_CHARGE"
)

// Reasons, per type. The spec lists the reasons in use without pairing them
// with types; each reason's name says which type it belongs to, and a CHARGE
// with reason FULL_CREDIT_REFUND would post money the wrong way.
var (
	chargeReasons    = []string{"IMPORTED_CHARGE"}
	creditReasons    = []string{"IMPORTED_CREDIT", "GENERAL_CREDIT"}
	paymentReasons   = []string{"ACCOUNT_CHARGE_PAYMENT"}
	repaymentReasons = []string{"FULL_CREDIT_REFUND"}
)

var (
	paymentTypes = []string{"DD_REGULAR_COLLECTION", "DIRECT_CREDIT", "DEBIT_CARD", "CREDIT_CARD"}
	rateBands    = []string{"CONSUMPTION_STANDARD", "CONSUMPTION_DAY", "CONSUMPTION_NIGHT", "STANDING_CHARGE"}
	taxTypes     = []string{"VAT"}
	taxUnitTypes = []string{"PROPORTION", "PERCENTAGE"}
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
)

// String length limits, as in jobs/account.
const (
	maxCode       = 128 // identifiers, codes, references
	maxAccountRef = 128
	maxShortText  = 255
	maxLongText   = 2000 // display notes and internal notes
)
