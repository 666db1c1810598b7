package postimport

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// Top-level codes of a refused request. The individual problems are in the
// error's Errors, each with its own code and attr.
const (
	CodeParseError         = validate.CodeParseError
	CodeNotesFailed        = "notes_failed_validation"
	CodeTransactionsFailed = "transactions_failed_validation"
	CodeStatementsFailed   = "historical_statements_failed_validation"
	// CodeAccountNotFound (404) covers an unknown account, an account that
	// is only staged, and a supplier the caller's key may not see.
	CodeAccountNotFound = "account_not_found"
	// CodeDocumentStoreNotConfigured (500): DOCUMENTS_URL is not set, so a
	// document reference cannot be checked.
	CodeDocumentStoreNotConfigured = documents.CodeStoreNotConfigured
	// CodeDocumentStoreUnavailable (500): the store did not answer.
	CodeDocumentStoreUnavailable = documents.CodeStoreUnavailable
)

// The codes of individual problems. Each is stable: callers branch on them.
const (
	CodeTooManyItems            = validate.CodeTooManyItems
	CodeInvalidDocumentPath     = documents.CodeInvalidPath
	CodeDocumentNotFound        = documents.CodeNotFound
	CodeAmountPrecision         = "invalid_amount_precision"
	CodeAmountOutOfRange        = "amount_out_of_range"
	CodeAmountNotPositive       = "amount_must_be_positive"
	CodeDuplicateTransactionIDs = "duplicate_transaction_ids"
	CodeTransactionInFuture     = "transaction_in_future"
	CodeNotInOpenPeriod         = "transaction_not_in_open_statement_period"
	CodeProductNotFound         = "product_code_does_not_exist"
	CodeStartAfterEnd           = "start_date_later_than_end_date"
	CodeBalanceOutOfRange       = "ledger_balance_out_of_range"
	CodeDuplicateStatementIDs   = "duplicate_statement_ids"
	CodeStatementExists         = "historical_statement_already_exists"
	// CodeStatementInFuture is the reference's code for a statement whose
	// period ends after today.
	CodeStatementInFuture = "historical_statement_period_end_in_future"
)

// rule is one row of a rules table in RULES.md.
type rule struct {
	code string
	at   string
	text string
}

// The rules beyond the field tables, per endpoint.
// TestRules_EveryRuleIsTested fails when one of these codes has no test case.
var (
	noteRules = append([]rule{
		{CodeAccountNotFound, "`external_account_number` (404)", "The account was created (E5) for this import supplier, and the caller's key may use the supplier. An account that is only staged, an unknown one, and one of a supplier the key may not see get the same answer. Source: spec E6 (404)."},
		{CodeTooManyItems, "`notes`", fmt.Sprintf("At most %d notes per request. Source: a limit of this service (spec 8.2 sets none): one request is one database transaction.", MaxNotes)},
	}, sharedNoteRules()...)
	transactionRules = slices.Concat([]rule{
		{CodeAccountNotFound, "`external_account_number` (404)", "As for E6. Source: reference section 3 (transactions/create answers 404 when the account was not imported)."},
		{CodeNotInOpenPeriod, "`transactions.N.transaction_date`", "With `force_add_to_current_statement=false`, the date is in the open statement period (above). With the default `true`, an earlier date is moved to the period's first day instead, unless that day is after today. Source: spec 2.7 and E7, reference 3.5 (the 400 example)."},
	}, transactionItemRules("transactions.N.", "K"), []rule{
		{CodeBalanceOutOfRange, "`transactions`", "The ledger balance stays below 1,000,000,000,000 in absolute value. Source: storage (the check `ledgers_balance_range`); no real account comes near it."},
		{CodeTooManyItems, "`transactions`", fmt.Sprintf("At most %d transactions per request. Source: spec 8 leaves array lengths to the service; this keeps a request to one short database transaction.", MaxTransactions)},
		{validate.CodeInvalid, "`check_previously_added`, `force_add_to_current_statement`", "Query parameters are `true` or `false` (also `1` or `0`), given at most once; empty or omitted means `true`. Source: spec E7 (both are booleans)."},
	})
	statementRules = slices.Concat([]rule{
		{CodeAccountNotFound, "`external_account_number` (404)", "As for E6. Source: reference 10 (historical-statements/create, 404)."},
		{CodeStatementExists, "`statements.N.statement_id`", "The account has no statement with this id yet: ids are unique per account, so a re-sent request is refused, never doubled. Source: reference 3.5 (`historical_statement_already_exists`)."},
	}, statementItemRules("`statements.N.%s`"), []rule{
		{CodeTooManyItems, "`statements`", fmt.Sprintf("At most %d statements per request. Source: spec 8 leaves array lengths to the service.", MaxStatements)},
	})
)

// StatementRule is a rule of one historical statement that E8 and the
// account payload's statements[] both check (CheckStatements and the
// document check): Field is the statement's field it is reported at.
type StatementRule struct {
	Code, Field, Text string
}

// StatementItemRules are the statement rules that E8 and the account
// payload share, in the words of both
// RULES.md files. TestRules_EveryRuleIsTested here and the account's
// TestRules_EverySemanticCodeIsTested keep each one tested.
var StatementItemRules = []StatementRule{
	{CodeDuplicateStatementIDs, "statement_id", "A statement id appears once in the list (reported at the second occurrence). Source: reference 3.5 (`historical_statement_already_exists`), within one list."},
	{CodeStartAfterEnd, "bill_period_from_date", "Not after `bill_period_to_date`. Source: reference 9 (`start_date_later_than_end_date`)."},
	{CodeStatementInFuture, "bill_period_to_date", "Not after today in the supplier's time zone: a historical statement covers a past period. Source: reference 9 (`historical_statement_period_end_in_future`)."},
	{CodeAmountOutOfRange, "gross_amount", "Fits a 64-bit integer. Source: reference 3.5 (`gross_amount` is an integer)."},
	{CodeInvalidDocumentPath, "statement_path", pathRule},
	{CodeDocumentNotFound, "statement_path", existsRule},
}

// statementItemRules writes StatementItemRules as rows, each reported at
// the field written into at, a format with one %s.
func statementItemRules(at string) []rule {
	out := make([]rule, len(StatementItemRules))
	for i, r := range StatementItemRules {
		out[i] = rule{r.Code, fmt.Sprintf(at, r.Field), r.Text}
	}
	return out
}

const (
	pathRule   = "A path relative to the import supplier's document root: no backslash, no control character, no empty, `.` or `..` segment, at most 1024 bytes. One leading `/` is allowed: `/a/b.pdf` and `a/b.pdf` name the same document. Source: spec 2.8."
	existsRule = "Only for an import supplier that requires documents (`importctl supplier set-option CODE require-documents on`; off by default, and then the store is not read): the document is in the store under the supplier's root. Each distinct path is checked once. Source: reference section 9 (`path_does_not_exist_in_file_store`)."
)

// sharedNoteRules are the note rules of jobs/note, in the same words as in
// jobs/account/RULES.md.
func sharedNoteRules() []rule {
	out := make([]rule, len(note.Rules))
	for i, r := range note.Rules {
		out[i] = rule{r.Code, r.At, r.Row()}
	}
	return out
}

// unitsType is how the reference shows the type of line_items[].units,
// which the schema DSL has no type for.
const unitsType = "array of decimal numbers"

// Reference returns RULES.md.
func Reference() string {
	var b strings.Builder
	b.WriteString(`# Post-import data rules: notes (E6), transactions (E7), historical statements (E8)

<!-- Generated by TestRulesFile from jobs/postimport (schemas and rules.go). Do not edit by hand:
     change the code and run go test ./jobs/postimport -run TestRulesFile -update -->

These endpoints import data onto an account that E5 created. Each request names the account with ` + "`import_supplier`" + `
and ` + "`external_account_number`" + ` and carries an array of items. A request is all or nothing: it is checked in full,
every problem is reported (each at its ` + "`attr`" + `, a dot path with zero-based indexes such as ` + "`transactions.3.amount`" + `),
and only a request without problems writes anything, in one database transaction.

| Endpoint | Success | Refusal |
|---|---|---|
| ` + "`POST /v1/data-import/notes/create/`" + ` (E6) | 201, a JSON array with one ` + "`{created_at, body, document_paths, status}`" + ` per posted note, in order; ` + "`status`" + ` is ` + "`NOTE_CREATION_SUCCESS` or `NOTE_ALREADY_EXISTS`" + ` | 400 ` + "`notes_failed_validation`" + ` |
| ` + "`POST /v1/data-import/transactions/create/?check_previously_added=&force_add_to_current_statement=`" + ` (E7) | 201 ` + "`{\"results\": [{\"status\", \"transaction_data\"}]}`" + `, in order | 400 ` + "`transactions_failed_validation`" + `, in E7's form (below) |
| ` + "`POST /v1/data-import/historical-statements/create/`" + ` (E8) | 201, the validated request (` + "`gross_amount`" + ` an integer, as sent) | 400 ` + "`historical_statements_failed_validation`" + ` |

All three answer 404 ` + "`account_not_found`" + ` when the account does not exist as an imported account of a supplier the
caller's key may use (only staged, unknown, or not visible: the same answer). When the request is also invalid, the 404
comes first, unless ` + "`import_supplier`" + ` or ` + "`external_account_number`" + ` themselves are invalid (400). A body that is not
JSON, or not a JSON object, gets 400 ` + "`parse_error`" + ` with the byte offset in the detail. When the import supplier
requires documents (below), a request that references a document while the service has no document store
(` + "`DOCUMENTS_URL`" + ` unset) gets 500 ` + "`document_store_not_configured`" + `; a store that does not answer, 500
` + "`document_store_unavailable`" + `; both with ` + "`Retry-After`" + `.

The field tables' own codes follow the spec: ` + "`unknown_field`" + ` (section 1, rule 6: only documented fields),
` + "`required`" + `, ` + "`invalid`" + `, ` + "`blank`" + `, ` + "`invalid_date`" + ` and ` + "`invalid_datetime`" + ` (the types of section 2 and the date
forms of rule 5). ` + "`max_length`" + ` limits are the service's own bounds on stored text; the spec sets none.

` + validate.LimitsRule + `

Concurrent requests for one account take turns (the account's row is locked for the request's transaction), so two
identical requests sent at once behave as if sent one after the other.

## The open statement period

An account has one open statement period at a time; earlier dates belong to closed statements.

- Every billed date is **inclusive**: a historical statement (E8) covers ` + "`bill_period_from_date`" + ` to
  ` + "`bill_period_to_date`" + `, both days included, as the reference says (3.5, "both inclusive"), and ` + "`last_billed_to_date`" + `
  (the latest of the account's supply points' at creation) is the last day billed. A transaction dated on the last day of
  a statement is in a billed period. The reading, and why the reference's example statements that share a day do not
  change it, is argued in docs/decisions.md ("Statement periods: both dates inclusive").
- The **open period starts** the day after the latest billed day: the latest ` + "`bill_period_to_date`" + ` of the account's
  statements, its ` + "`last_billed_to_date`" + ` and the ` + "`last_statement_closing_date`" + ` of the ledger its payload carried
  (jobs/account/RULES.md). An account with neither opens on its creation date in its supplier's time zone, so a transaction dated the
  day a new account was created is in the period. The period ends today, dated in the supplier's time zone (` + "`importctl supplier set-time-zone`" + `, default UTC).
- Importing a statement that ends later moves the start at once; importing an older one never reopens a billed period.
- E7 refuses a transaction dated after today (` + "`transaction_in_future`" + `) in every case. A transaction dated before the
  open period is refused (` + "`transaction_not_in_open_statement_period`" + `) when ` + "`force_add_to_current_statement=false`" + `;
  by default (` + "`true`" + `) it is **moved** to the period's first day: its ` + "`transaction_date`" + ` becomes that day,
  ` + "`original_transaction_date`" + ` keeps the date sent, ` + "`description`" + ` explains the move (all three are in the answer),
  and one note per request, pinned to the account, lists the moved transactions.
- Forcing **never moves a transaction into the future**: when the account is billed to today or later, the period's first
  day is after today, and a transaction before it is refused (` + "`transaction_not_in_open_statement_period`" + `) with or
  without force.

## The ledger

Each account has one ledger; E7 changes its balance in the same database transaction that adds the transactions.
The ledger that the account payload carries (jobs/account/RULES.md) is stored the same way when E5 creates the account:
its transactions are rows like E7's, written by the same SQL function (` + "`insert_transactions`" + `) after the same rules of a
transaction, and
its balance is the sum of theirs by the table below; E7 later skips their ids and adds to that balance. The
**balance is what the customer owes**: positive means the customer is in debit, negative in credit. Amounts are in the
currency's major unit and keep their sign as sent (a negative CHARGE is a reversal and lowers the balance).

| Type | Effect on the balance |
|---|---|
| CHARGE | + amount |
| SUPPLY_CHARGE | + amount |
| REPAYMENT (money paid back to the customer) | + amount |
| CREDIT | − amount |
| PAYMENT (money received from the customer) | − amount |

Amounts are read from the JSON number's text, or from a decimal string, into a decimal (an exponent is JSON too: ` + "`1e2`" + ` is ` + "`100.00`" + `),
kept exactly with up to 10 decimal places in ` + "`numeric`" + ` columns (each with the scale it was written with), and
summed exactly into the balance; they never pass through a binary float. A transaction's ` + "`amount`" + ` is answered as a string with two
places (` + "`\"71.00\"`" + `), as spec 2.7 says, rounded half away from zero (` + "`0.125`" + ` is answered ` + "`\"0.13\"`" + `, ` + "`-0.125`" + `
` + "`\"-0.13\"`" + `): the answer is rounded, never what is stored. The other money fields (` + "`net_amount`" + `, a tax item's
` + "`amount`" + ` and ` + "`value_taxed`" + `), for which the spec shows no answer form, are answered exactly, as strings with at least
two places (` + "`\"44.00\"`" + `, ` + "`\"0.125\"`" + `). Historical statements do not change the
balance: they record bills whose transactions are imported with E7.

## E6: notes

A posted note is created unless the account already has the same note; its status is then ` + "`NOTE_ALREADY_EXISTS`" + ` and
the answer carries the existing note's ` + "`created_at`" + `. Two notes are the same when they have the same ` + "`body`" + ` (for
a note without a body: the same document paths, in order) and, when the posted note gives ` + "`created_at`" + `, the same
creation time. Notes created with the account (the payload's ` + "`notes`" + `) count, and so do earlier notes of the same
request. ` + "`created_at`" + ` defaults to now, to the second.

`)
	writeFields(&b, notesSchema.Spec())
	writeRules(&b, noteRules)
	b.WriteString(`
## E7: financial transactions

Query parameters, both optional, default ` + "`true`" + `:

- ` + "`check_previously_added`" + `: a transaction whose ` + "`transaction_id`" + ` the account already has is skipped, with status
  ` + "`TRANSACTION_ALREADY_EXISTS`" + `, so that re-sending a request after a timeout never adds anything twice. With
  ` + "`false`" + ` the service does not look, as the caller asked: the transaction is added, and the account then holds two
  transactions with that id. The reference refuses a repeated id only within one request (3.5,
  ` + "`duplicate_transaction_ids`" + `), and so does the service.
- ` + "`force_add_to_current_statement`" + `: see the open statement period above.

Every added transaction has status ` + "`TRANSACTION_ADDED_TO_ACCOUNT`" + `; ` + "`transaction_data`" + ` echoes it as stored, with
amounts as strings and ` + "`\"status\": \"TRANSACTION_IMPORT_SUCCESS\"`" + `.

**Dry run.** With ` + "`\"dry_run\": true`" + ` in the body (reference 3.3: "Running in dry-run mode will not create any
transactions") the request is checked exactly as without it, against the account too, and answered as it would be: the
same 400, or the same 201 with ` + "`\"dry_run\": true`" + ` added beside ` + "`results`" + `. Nothing is written: no transaction, no
ledger change, no pinned note. The reference documents no other answer for a dry run of this endpoint, so it keeps E7's
201 (unlike E5, whose dry run the reference answers with a 400).

` + "`reason`" + `, ` + "`payment_type`" + `, ` + "`line_items[].rate_band`" + `, ` + "`tax_items[].tax_type`" + ` and ` + "`tax_items[].unit_type`" + ` are
open codes: the spec lists values "in use", an example and not the whole set, and the reference's own example sends
` + "`PREPAY_DEBT_ADJUSTMENT`" + ` and a PAYMENT with ` + "`GENERAL_CREDIT`" + `. Any code of at most 64 characters is kept as sent
(no source fixes their form); a longer one gets ` + "`invalid_choice`" + `.

A refusal (400) adds nothing. Its body has the section 7 fields and the spec's:

` + "```json" + `
{
  "status": "TRANSACTION_IMPORT_ERROR",
  "error_detail": "the first problem of the first failing transaction",
  "transaction_data": {"transaction_id": "...", "amount": "71.00", "...": "that transaction as sent, or null"},
  "code": "transactions_failed_validation",
  "detail": "Could not import the transactions; none was added.",
  "errors": [{"detail": "...", "code": "transaction_in_future", "attr": "transactions.3.transaction_date"}]
}
` + "```" + `

`)
	b.WriteString("`transaction_data` is the first failing transaction as sent, except that each valid money field is written as\n" +
		"on success: `amount` a string with two places, as in the spec's 400 example, and `line_items[].net_amount`,\n" +
		"`tax_items[].amount` and `value_taxed` exact strings with at least two places.\n\n")
	writeFields(&b, transactionsSchema.Spec())
	writeRules(&b, transactionRules)
	b.WriteString(`
## E8: historical statements

Only ` + "`statement_id`" + `, ` + "`bill_period_from_date`" + ` and ` + "`bill_period_to_date`" + ` are required (reference 3.5). Both dates
are inclusive (see the open statement period above); a statement of one day has the same two dates. The service does not
refuse overlapping statements, nor ones that share a day (as the reference's account example does): neither the spec nor
the reference does, and a re-issued bill overlaps the one it replaced.
` + "`gross_amount`" + ` is an integer in the currency's lowest denomination, stored and answered exactly as sent: the spec
types it only as "number" (2.9), the reference as "integer, in the lowest denomination for the currency" (3.5, with
its example ` + "`\"gross_amount\": 100`" + `). The service follows the reference: an integer is a number, so the spec is
satisfied too, and a client written against the reference sends pence, which read as pounds would be off by a factor of
100 without any error. The 201 answer is the validated request: what was sent, without omitted fields.

`)
	writeFields(&b, statementsSchema.Spec())
	writeRules(&b, statementRules)
	b.WriteString(`
## Documents

Documents live in the object store named by ` + "`DOCUMENTS_URL`" + ` (a gocloud.dev/blob URL: ` + "`file:///path`" + ` locally,
` + "`s3://bucket?region=...`" + ` in production, with the bucket's options in the URL). A document's key is the import
supplier's document root (` + "`importctl supplier create --document-root`" + `), ` + "`/`" + `, then the path given without
its leading ` + "`/`" + `. Every supplier has a root of its own (` + "`suppliers/CODE`" + ` by default), neither inside nor around
another supplier's root, so its paths name only its own documents. The service never stores files. Whether a referenced document
must exist is a setting of the import supplier, off by default as on the reference platform:
` + "`importctl supplier set-option CODE require-documents on`" + ` (or ` + "`off`" + `). When it is on, E5 (the account's notes), E6 and E8
refuse a path that names nothing (` + "`path_does_not_exist_in_file_store`" + `); when it is off, the store is not read.
Migration teams upload documents with ` + "`importctl document put SUPPLIER PATH FILE`" + ` (reads ` + "`DATABASE_URL`" + ` and
` + "`DOCUMENTS_URL`" + `).
`)
	return b.String()
}

func writeFields(b *strings.Builder, o *validate.ObjectSpec) {
	b.WriteString("### Fields\n\nAny field not listed is refused with `unknown_field`, a key given twice with `duplicate_key`.\n\n")
	t := validate.Reference(o)
	t = strings.ReplaceAll(t, "| `transactions[].line_items[].units` | decimal number |", "| `transactions[].line_items[].units` | "+unitsType+" |")
	b.WriteString(t)
}

func writeRules(b *strings.Builder, rules []rule) {
	b.WriteString("\n### Rules across fields and against the account\n\n| Code | Reported at | Rule |\n|---|---|---|\n")
	for _, r := range rules {
		fmt.Fprintf(b, "| `%s` | %s | %s |\n", r.code, r.at, r.text)
	}
}
