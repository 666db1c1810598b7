// Package jobs holds the work of the service: the Asynq task contracts in
// this file (type names, queues, payloads and constructors) and, in its
// sub-packages, the domain rules those tasks and the API run. The API and the
// worker both import it, never each other.
package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Task types are noun:verb, and no type is a prefix of another, because
// asynq's ServeMux matches by prefix.
const (
	TypeAccountProcess = "account:process"
	TypeEmailSend      = "email:send"
	// TypePaymentInstructionVerify asks a payment vendor about an
	// instruction and stores it (E2, E9).
	TypePaymentInstructionVerify = "payment_instruction:verify"
)

// TaskTypes are every task type, for what must know them all (the
// metrics' series, created at 0).
var TaskTypes = []string{TypeAccountProcess, TypeEmailSend, TypePaymentInstructionVerify}

// Queues. Accounts get their own so that their concurrency can be limited
// (PROCESS_CONCURRENCY_LIMIT) apart from the other work.
const (
	QueueAccounts = "accounts"
	QueueVendors  = "vendors"
	QueueEmails   = "emails"
)

// Account processing task settings, chosen for a caller who waits:
//   - MaxRetry 3: a creation fails for infrastructure reasons only (an invalid
//     payload is not retried at all); three tries ride out a database
//     failover without keeping a broken task alive for days.
//   - Timeout 2m: a large account creates in well under a second; a task that
//     runs for minutes is stuck, and its lease must return to the queue.
//   - Retention 2m: a finished task stays visible in the dashboard briefly;
//     after that a new E5 call for the same account may enqueue again.
const (
	AccountProcessMaxRetry  = 3
	AccountProcessTimeout   = 2 * time.Minute
	AccountProcessRetention = 2 * time.Minute
)

// AccountProcessPayload is the payload of TypeAccountProcess. The worker
// re-reads the staged data from PostgreSQL; the payload only names it.
type AccountProcessPayload struct {
	ProcessID             int64  `json:"process_id"`
	SupplierID            int64  `json:"supplier_id"`
	SupplierCode          string `json:"supplier_code"`
	ExternalAccountNumber string `json:"external_account_number"`
	OperationsTeamID      int64  `json:"operations_team_id"`
	DryRun                bool   `json:"dry_run"`
}

// AccountTaskID derives the task id from the supplier and the external
// account number, so that concurrent E5 calls for one account share one task.
// Dry runs get ids of their own: they must never stand in for a real run.
func AccountTaskID(supplierCode, externalAccountNumber string, dryRun bool) string {
	h := sha256.Sum256([]byte(supplierCode + "\x00" + externalAccountNumber))
	id := "account-" + hex.EncodeToString(h[:16])
	if dryRun {
		id += "-dry"
	}
	return id
}

// NewAccountProcessTask returns the task that creates (or dry-runs) an account.
func NewAccountProcessTask(p AccountProcessPayload) (*asynq.Task, error) {
	return NewAccountProcessTaskID(p, AccountTaskID(p.SupplierCode, p.ExternalAccountNumber, p.DryRun))
}

// NewAccountProcessTaskID is NewAccountProcessTask under the task id id: a
// task that takes over the account from one whose worker died
// (jobs/process). Whatever its id, the task announces its end on the
// account's own channel, AccountTaskID's.
func NewAccountProcessTaskID(p AccountProcessPayload, id string) (*asynq.Task, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", TypeAccountProcess, err)
	}
	return asynq.NewTask(TypeAccountProcess, b,
		asynq.TaskID(id),
		asynq.Queue(QueueAccounts),
		asynq.MaxRetry(AccountProcessMaxRetry),
		asynq.Timeout(AccountProcessTimeout),
		asynq.Retention(AccountProcessRetention),
	), nil
}

// EmailSendPayload is the payload of TypeEmailSend: one outbox row.
type EmailSendPayload struct {
	OutboxID int64 `json:"outbox_id"`
}

// NewEmailSendTask returns the task that sends one migration e-mail.
func NewEmailSendTask(outboxID int64) (*asynq.Task, error) {
	b, err := json.Marshal(EmailSendPayload{OutboxID: outboxID})
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TypeEmailSend, b,
		asynq.TaskID(fmt.Sprintf("email-%d", outboxID)),
		asynq.Queue(QueueEmails),
		asynq.MaxRetry(10),
		asynq.Timeout(time.Minute),
	), nil
}

// PaymentInstructionVerifyRetention keeps a finished verification visible
// in the dashboard briefly. The bounded retry with backoff happens inside
// the task, against the vendor, while the API waits, and every failure the
// task itself reports skips Asynq's retries: a failed task is archived for
// the operator to see.
const PaymentInstructionVerifyRetention = 2 * time.Minute

// PaymentInstructionVerifyMaxRetry is 3, not 0, for the failures the task
// cannot report or a retry cures. Its worker died (SIGKILL, a lost host):
// Asynq's recoverer then finds the lease expired and retries the task if
// it has a retry left, or archives it. With none left, a verification
// whose instruction a takeover (jobs/payment) or the dead worker itself
// had stored stayed archived as failed, "task lease expired", a failure
// that did not happen; the chaos runs found such tasks after worker kills,
// and with one retry, a task whose worker was killed twice in a row (50
// kills in three minutes). The retry finds its instruction stored and ends
// as done (Verifier.Run), or finishes a verification that nobody took
// over. An infrastructure failure the task reports uses the retries too
// (payment.Verifier.Run); refusals skip them. Asynq also retries a task
// whose context ended, whatever the handler returns: one that ran out of
// time, or that the API abandoned because its caller's wait ran out
// (taskwait.Abandon), runs again, and the caller's retry joins it or finds
// the instruction stored.
const PaymentInstructionVerifyMaxRetry = 3

// PaymentInstructionVerifyPayload is the payload of
// TypePaymentInstructionVerify. Exactly one of AccountID (E9) and BusinessID
// (E2) is set; AccountIDs are the accounts of a business's instruction. The
// worker re-reads the vendor and re-checks for a duplicate in PostgreSQL.
type PaymentInstructionVerifyPayload struct {
	SupplierID int64   `json:"supplier_id"`
	VendorID   int64   `json:"vendor_id"`
	Reference  string  `json:"reference"`
	Type       string  `json:"type"`
	AccountID  int64   `json:"account_id,omitempty"`
	BusinessID int64   `json:"business_id,omitempty"`
	AccountIDs []int64 `json:"account_ids,omitempty"`
}

// PaymentInstructionTaskID derives the task id from the whole payload, so
// that identical concurrent requests share one task, and requests that
// differ in anything (vendor, type, accounts) never stand in for each other.
func PaymentInstructionTaskID(p PaymentInstructionVerifyPayload) string {
	b, _ := json.Marshal(p) // cannot fail: plain fields
	h := sha256.Sum256(b)
	return "payment-instruction-" + hex.EncodeToString(h[:16])
}

// NewPaymentInstructionVerifyTask returns the verification task. timeout
// must exceed the vendor's attempts times its timeout plus the backoff
// between them (payment.Vendor.Budget), or Asynq would cut the retries short.
func NewPaymentInstructionVerifyTask(p PaymentInstructionVerifyPayload, timeout time.Duration) (*asynq.Task, error) {
	return NewPaymentInstructionVerifyTaskID(p, timeout, PaymentInstructionTaskID(p))
}

// NewPaymentInstructionVerifyTaskID is NewPaymentInstructionVerifyTask under
// the task id id: a task that takes over the verification from one whose
// worker died (jobs/payment). Whatever its id, the task announces its end on
// the channel of PaymentInstructionTaskID.
func NewPaymentInstructionVerifyTaskID(p PaymentInstructionVerifyPayload, timeout time.Duration, id string) (*asynq.Task, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode %s payload: %w", TypePaymentInstructionVerify, err)
	}
	return asynq.NewTask(TypePaymentInstructionVerify, b,
		asynq.TaskID(id),
		asynq.Queue(QueueVendors),
		asynq.MaxRetry(PaymentInstructionVerifyMaxRetry),
		asynq.Timeout(timeout),
		asynq.Retention(PaymentInstructionVerifyRetention),
	), nil
}

// DoneChannel is the Redis pub/sub channel on which the worker announces
// that a task finished, so that a waiting API request wakes at once. Pub/sub
// channels are the whole server's, not a database's: the channel names the
// database (db, REDIS_URL's number; 0 in a cluster) so that services that
// share a Redis server in databases of their own never hear each other's
// announcements, which would answer an E5 with another service's account.
func DoneChannel(db int, taskID string) string {
	return "importd:done:" + strconv.Itoa(db) + ":" + taskID
}

// AccountOutcome is what the worker announces on an account task's
// DoneChannel when the task ends for good, and what a waiting E5 reads.
// The announcement only wakes the request, except for a created account,
// which is final: E5 answers its number without reading PostgreSQL.
type AccountOutcome struct {
	// Outcome is one of the AccountOutcome* values.
	Outcome              string          `json:"outcome"`
	ServiceAccountNumber string          `json:"service_account_number,omitempty"`
	Error                *problem.Record `json:"error,omitempty"`
}

// The outcomes of an account task.
const (
	AccountOutcomeCreated         = "created"           // the account exists, with ServiceAccountNumber
	AccountOutcomeFailed          = "failed"            // refused or failed, with Error
	AccountOutcomeDryRunSucceeded = "dry_run_succeeded" // a dry run would have created it
)

// The failures the worker records for an account task that ended without
// its handler: E5 answers them as the service's failures (500), not the
// data's.
const (
	// CodeAccountProcessingAbandoned: Asynq archived the task after its
	// worker died on its last attempt.
	CodeAccountProcessingAbandoned = "account_processing_abandoned"
	// CodeAccountProcessingLost: the task vanished from Redis while its
	// process row said IN_PROGRESS, with no request waiting to queue it
	// again.
	CodeAccountProcessingLost = "account_processing_lost"
)

// Refused is the error of a task refused for good because of its data (an
// invalid account, an instruction the vendor rejects). It wraps
// asynq.SkipRetry, so the task is archived without a retry, and carries the
// refusal's code so that the worker logs it as an expected outcome, at info,
// rather than as a failure.
type Refused struct {
	// Code is the stable error code recorded for the caller.
	Code string
	Err  error
}

func (r *Refused) Error() string { return r.Err.Error() }

// Unwrap lets errors.Is find both the cause and asynq.SkipRetry.
func (r *Refused) Unwrap() []error { return []error{r.Err, asynq.SkipRetry} }
