package creation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/metrics"
)

// batchRig creates accounts through a Creator with one writer, so that the
// accounts queued while the writer is busy share the next transaction.
type batchRig struct {
	t                  *testing.T
	d                  *db.DB
	c                  *Creator
	m                  *metrics.Metrics
	supplierID, teamID int64
}

func newBatchRig(t *testing.T, size int) *batchRig {
	t.Helper()
	x, err := sqlx.Open("postgres", dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	d := db.New(x)
	t.Cleanup(func() { d.Close() })
	seedCatalogue(t, d)
	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	r := &batchRig{t: t, d: d, m: metrics.New()}
	log := slog.New(slog.DiscardHandler)
	r.c = NewCreator(d, rdb, account.NewCatalog(d, nil), nil, NewAnnouncer(rdb, log), log).
		WithBatching(Batching{Writers: 1, Size: size}, r.m)
	r.c.now = func() time.Time { return createToday }
	if err := d.Get(&r.supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		t.Fatal(err)
	}
	if err := d.Get(&r.teamID, `SELECT id FROM operations_teams`); err != nil {
		t.Fatal(err)
	}
	return r
}

// stage stages the fixture as account number, changed by edit when not nil.
func (r *batchRig) stage(number string, edit func(map[string]any)) jobs.AccountProcessPayload {
	r.t.Helper()
	var m map[string]any
	if err := json.Unmarshal(createFixtures(r.t)["fixture"].payload, &m); err != nil {
		r.t.Fatal(err)
	}
	m["external_account_number"] = number
	if edit != nil {
		edit(m)
	}
	b, _ := json.Marshal(m)
	var id int64
	if err := r.d.Get(&id, `INSERT INTO import_processes (supplier_id, external_account_number, payload, status)
		VALUES ($1, $2, $3, 'IN_PROGRESS') RETURNING id`, r.supplierID, number, b); err != nil {
		r.t.Fatal(err)
	}
	return jobs.AccountProcessPayload{ProcessID: id, SupplierID: r.supplierID, SupplierCode: "DEMO",
		ExternalAccountNumber: number, OperationsTeamID: r.teamID}
}

// runQueued runs the first task while its staged row is locked elsewhere,
// so that it holds the one writer; then it starts the others, with their
// contexts from ctxOf (nil: background), waits until all of them are
// queued, calls meanwhile, and lets the first go. It returns each task's
// error, on its last attempt.
func (r *batchRig) runQueued(ps []jobs.AccountProcessPayload, ctxOf func(i int) context.Context, meanwhile func()) []error {
	r.t.Helper()
	blocker, err := r.d.Beginx()
	if err != nil {
		r.t.Fatal(err)
	}
	defer blocker.Rollback()
	if _, err := blocker.Exec(`SELECT 1 FROM import_processes WHERE id = $1 FOR UPDATE`, ps[0].ProcessID); err != nil {
		r.t.Fatal(err)
	}
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	start := func(i int) {
		ctx := context.Background()
		if ctxOf != nil && ctxOf(i) != nil {
			ctx = ctxOf(i)
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = r.c.Run(ctx, ps[i], true) }()
	}
	start(0)
	r.waitFor("the first task to hold the writer", func(queued, busy int) bool { return queued == 0 && busy == 1 })
	for i := 1; i < len(ps); i++ {
		start(i)
	}
	r.waitFor("the other tasks to queue", func(queued, busy int) bool { return queued == len(ps)-1 })
	if meanwhile != nil {
		meanwhile()
	}
	if err := blocker.Rollback(); err != nil {
		r.t.Fatal(err)
	}
	wg.Wait()
	return errs
}

func (r *batchRig) waitFor(what string, ok func(queued, busy int) bool) {
	r.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ok(r.c.batch.Queued(), r.c.batch.Leading()) {
			return
		}
	}
	r.t.Fatalf("timed out waiting for %s", what)
}

// transactions is how many transactions wrote the accounts of numbers.
func (r *batchRig) transactions(numbers []string) int {
	r.t.Helper()
	var n int
	if err := r.d.Get(&n, `SELECT count(DISTINCT xmin::text) FROM accounts WHERE external_account_number = ANY($1)`,
		numbersArray(numbers)); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// created reports whether number has an account, and its process the same
// service account number, COMPLETED.
func (r *batchRig) created(number string) bool {
	r.t.Helper()
	var n int
	if err := r.d.Get(&n, `SELECT count(*) FROM accounts a JOIN import_processes p ON p.id = a.import_process_id
		WHERE a.external_account_number = $1 AND p.status = 'COMPLETED' AND p.service_account_number = a.service_account_number`,
		number); err != nil {
		r.t.Fatal(err)
	}
	return n == 1
}

func (r *batchRig) lastErrorCode(number string) string {
	r.t.Helper()
	var code *string
	if err := r.d.Get(&code, `SELECT last_error->>'code' FROM import_processes WHERE external_account_number = $1`, number); err != nil {
		r.t.Fatal(err)
	}
	if code == nil {
		return ""
	}
	return *code
}

// transactionsSeen is what importd_account_transaction_accounts recorded:
// per outcome, the number of transactions and their accounts in all.
func (r *batchRig) transactionsSeen() map[string][2]int {
	r.t.Helper()
	fams, err := r.m.Registry().Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[string][2]int{}
	for _, f := range fams {
		if f.GetName() != "importd_account_transaction_accounts" {
			continue
		}
		for _, m := range f.GetMetric() {
			// Every outcome's series exists from the start, at zero
			// (metrics.Metrics); only those with transactions count here.
			if h := m.GetHistogram(); h.GetSampleCount() > 0 {
				out[m.GetLabel()[0].GetValue()] = [2]int{int(h.GetSampleCount()), int(h.GetSampleSum())}
			}
		}
	}
	return out
}

func numbersArray(numbers []string) any {
	b, _ := json.Marshal(numbers)
	return "{" + string(b[1:len(b)-1]) + "}"
}

func stageNumbered(r *batchRig, n int, edit map[int]func(map[string]any)) ([]jobs.AccountProcessPayload, []string) {
	ps := make([]jobs.AccountProcessPayload, n)
	numbers := make([]string, n)
	for i := range ps {
		numbers[i] = fmt.Sprintf("B-%02d", i)
		ps[i] = r.stage(numbers[i], edit[i])
	}
	return ps, numbers
}

// Accounts whose tasks run at once are created in one transaction: the
// tasks queued while the writer was busy all commit together.
func TestBatch_AccountsQueuedTogetherShareOneTransaction(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 16)
	ps, numbers := stageNumbered(r, 9, nil)
	for i, err := range r.runQueued(ps, nil, nil) {
		if err != nil {
			t.Errorf("account %s: %v", numbers[i], err)
		}
	}
	for _, n := range numbers {
		if !r.created(n) {
			t.Errorf("account %s was not created", n)
		}
	}
	if got := r.transactions(numbers); got != 2 {
		t.Errorf("9 accounts were written by %d transactions, want 2 (the first alone, the 8 queued behind it together)", got)
	}
	if diff := cmp.Diff(map[string][2]int{"committed": {2, 9}}, r.transactionsSeen()); diff != "" {
		t.Errorf("importd_account_transaction_accounts: transactions and accounts by outcome (-want +got):\n%s", diff)
	}
	var customers int
	if err := r.d.Get(&customers, `SELECT count(DISTINCT account_id) FROM customers`); err != nil || customers != 9 {
		t.Errorf("customers of %d accounts (%v), want 9", customers, err)
	}
}

// No transaction holds more than Size accounts.
func TestBatch_TransactionsHoldAtMostSizeAccounts(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 3)
	ps, numbers := stageNumbered(r, 7, nil)
	for i, err := range r.runQueued(ps, nil, nil) {
		if err != nil {
			t.Errorf("account %s: %v", numbers[i], err)
		}
	}
	// The first alone, then the six queued behind it, three at a time.
	if got := r.transactions(numbers); got != 3 {
		t.Errorf("7 accounts were written by %d transactions, want 3", got)
	}
}

// An account that fails inside a shared transaction fails alone: the
// transaction is rolled back and each of its accounts runs again in one of
// its own, so the others are created and the failing one is half-written
// nowhere.
func TestBatch_AFailingAccountDoesNotFailTheOthersOfItsTransaction(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 16)
	ps, numbers := stageNumbered(r, 6, nil)
	// A database error on one account's insert, as any constraint the
	// validation did not foresee would raise.
	for _, q := range []string{
		`CREATE FUNCTION refuse_b03() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by test'; END $$`,
		`CREATE TRIGGER refuse_b03 BEFORE INSERT ON accounts FOR EACH ROW
		WHEN (NEW.external_account_number = 'B-03') EXECUTE FUNCTION refuse_b03()`,
	} {
		if _, err := r.d.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	errs := r.runQueued(ps, nil, nil)
	for i, n := range numbers {
		if n == "B-03" {
			if errs[i] == nil || r.created(n) {
				t.Errorf("account B-03: error %v, created %v; want a failure and no account", errs[i], r.created(n))
			}
			continue
		}
		if errs[i] != nil || !r.created(n) {
			t.Errorf("account %s: error %v, created %v; want it created", n, errs[i], r.created(n))
		}
	}
	// The first alone, then the five queued behind it split: their runs
	// alone are not the writers' transactions.
	if diff := cmp.Diff(map[string][2]int{"committed": {1, 1}, "split": {1, 5}}, r.transactionsSeen()); diff != "" {
		t.Errorf("importd_account_transaction_accounts: transactions and accounts by outcome (-want +got):\n%s", diff)
	}
	// Its last attempt failed for the database's reason: recorded as the
	// service's failure, to be retried with E5.
	if code := r.lastErrorCode("B-03"); code != "internal_error" {
		t.Errorf("B-03 recorded %q, want internal_error", code)
	}
	var orphans int
	if err := r.d.Get(&orphans, `SELECT count(*) FROM import_processes p WHERE p.external_account_number = 'B-03'
		AND (p.service_account_number IS NOT NULL OR EXISTS (SELECT 1 FROM accounts a WHERE a.import_process_id = p.id))`); err != nil || orphans != 0 {
		t.Errorf("B-03 left %d traces (%v)", orphans, err)
	}
}

// A refusal found while writing (the catalogue lost a tariff after the
// account was validated) refuses that account only.
func TestBatch_ARefusalFoundWhileWritingRefusesOnlyItsAccount(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 16)
	if _, err := r.d.Exec(`INSERT INTO tariffs (product_id, code) SELECT id, 'GONE-1' FROM products`); err != nil {
		t.Fatal(err)
	}
	gone := func(m map[string]any) {
		for _, a := range m["supply_addresses"].([]any) {
			for _, sp := range a.(map[string]any)["supply_points"].([]any) {
				for _, ag := range sp.(map[string]any)["agreements"].([]any) {
					ag.(map[string]any)["tariff_code"] = "GONE-1"
				}
			}
		}
	}
	ps, numbers := stageNumbered(r, 5, map[int]func(map[string]any){2: gone})
	errs := r.runQueued(ps, nil, func() {
		if _, err := r.d.Exec(`DELETE FROM tariffs WHERE code = 'GONE-1'`); err != nil {
			t.Fatal(err)
		}
	})
	var refused *jobs.Refused
	if !errors.As(errs[2], &refused) || refused.Code != "tariff_code_not_found" {
		t.Errorf("B-02: %v, want refused with tariff_code_not_found", errs[2])
	}
	if code := r.lastErrorCode("B-02"); code != "tariff_code_not_found" || r.created("B-02") {
		t.Errorf("B-02 recorded %q, created %v; want tariff_code_not_found and no account", code, r.created("B-02"))
	}
	for i, n := range numbers {
		if i != 2 && (errs[i] != nil || !r.created(n)) {
			t.Errorf("account %s: error %v, created %v; want it created", n, errs[i], r.created(n))
		}
	}
}

// A task handed back while its account waits for a writer leaves the queue
// and records nothing: the account is created when the task runs again.
func TestBatch_TaskHandedBackWhileQueuedLeavesTheQueue(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 16)
	ps, numbers := stageNumbered(r, 4, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	errs := r.runQueued(ps, func(i int) context.Context {
		if i == 1 {
			return ctx
		}
		return nil
	}, func() {
		cancel(ErrHandedBack)
		r.waitFor("the handed-back task to leave the queue", func(queued, busy int) bool { return queued == len(ps)-2 })
	})
	if !errors.Is(errs[1], ErrHandedBack) {
		t.Errorf("handed-back task: %v, want ErrHandedBack", errs[1])
	}
	var status string
	if err := r.d.Get(&status, `SELECT status FROM import_processes WHERE id = $1`, ps[1].ProcessID); err != nil || status != "IN_PROGRESS" {
		t.Errorf("handed-back account: status %q (%v), want IN_PROGRESS and no failure", status, err)
	}
	if r.created(numbers[1]) || r.lastErrorCode(numbers[1]) != "" {
		t.Errorf("handed-back account was created or failed")
	}
	for i, n := range numbers {
		if i != 1 && (errs[i] != nil || !r.created(n)) {
			t.Errorf("account %s: error %v, created %v; want it created", n, errs[i], r.created(n))
		}
	}
	// Run again, as Asynq does with a handed-back task.
	if err := r.c.Run(context.Background(), ps[1], true); err != nil || !r.created(numbers[1]) {
		t.Errorf("second run of the handed-back task: %v, created %v", err, r.created(numbers[1]))
	}
}

// A transaction's outcome is what happened to it: a lone account staged
// again since it was read rolls back, and is counted so.
func TestCreateTogether_ALoneRestagedAccountRollsBack(t *testing.T) {
	t.Parallel()
	r := newBatchRig(t, 16)
	ps, _ := stageNumbered(r, 1, nil)
	j := &createJob{p: ps[0], payload: []byte(`{"staged": "before"}`)}
	if got := r.c.createTogether(context.Background(), []*createJob{j}); got != metrics.TxRolledBack {
		t.Errorf("outcome %q, want %q", got, metrics.TxRolledBack)
	}
	if !errors.Is(j.err, errRestaged) {
		t.Errorf("account error %v, want errRestaged", j.err)
	}
}
