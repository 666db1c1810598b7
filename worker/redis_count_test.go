package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/process"
	"github.com/bulkimport/bulkimport/jobs/slots"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// redisCounter is a go-redis hook that counts the commands and round trips
// of the clients it is added to, by who issues them (the client's name) and
// what they are for (the keys or channel they name).
type redisCounter struct {
	mu       sync.Mutex
	commands map[string]int // "client/purpose"
	trips    map[string]int // "client/purpose" of the first command
}

func newRedisCounter() *redisCounter {
	return &redisCounter{commands: map[string]int{}, trips: map[string]int{}}
}

func (c *redisCounter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.commands)
	clear(c.trips)
}

func (c *redisCounter) snapshot() (commands, trips map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	commands, trips = map[string]int{}, map[string]int{}
	for k, v := range c.commands {
		commands[k] = v
	}
	for k, v := range c.trips {
		trips[k] = v
	}
	return commands, trips
}

// purpose names what a command is for by the first key or channel it names.
func purpose(cmd redis.Cmder) string {
	for _, a := range cmd.Args() {
		s, _ := a.(string)
		switch {
		case strings.HasPrefix(s, slots.Key):
			return "limiter"
		case strings.HasPrefix(s, "importd:heartbeat:"):
			return "heartbeat"
		case strings.HasPrefix(s, "importd:outcome:"), strings.HasPrefix(s, "importd:done:"):
			return "taskwait"
		case strings.HasPrefix(s, "asynq:"):
			return "asynq"
		}
	}
	return "other:" + cmd.Name()
}

// hook returns the hook of the client called name.
func (c *redisCounter) hook(name string) redis.Hook { return counterHook{c, name} }

type counterHook struct {
	c    *redisCounter
	name string
}

func (h counterHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h counterHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (h counterHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds)
		return next(ctx, cmds)
	}
}

func (h counterHook) count(cmds []redis.Cmder) {
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	h.c.trips[h.name+"/"+purpose(cmds[0])]++
	for _, cmd := range cmds {
		h.c.commands[h.name+"/"+purpose(cmd)]++
	}
}

// countedConnOpt makes the Asynq servers' clients with the hook of a
// counter.
type countedConnOpt struct {
	asynq.RedisClientOpt
	hook redis.Hook
}

func (o countedConnOpt) MakeRedisClient() any {
	c := o.RedisClientOpt.MakeRedisClient().(*redis.Client)
	c.AddHook(o.hook)
	return c
}

// Redis commands of one E5 account, with the limiter on, besides the Asynq
// servers' own (dequeue, completion, and the polling of an idle queue,
// which depends on time rather than on accounts) and the heartbeat of a
// task that runs longer than taskwait.HeartbeatDelay (TestBeat_*): the
// limiter's slot (one script), whether the account has a task (EXISTS),
// the deletion of an earlier outcome, Asynq's enqueue script, the worker's
// one pipeline of release, stored outcome and announcement, and one
// enqueue per migration e-mail (the fixture's account has two). Besides the
// e-mails that is 5 round trips (7 commands). These limits keep out what a
// simpler design pays per account, 13 round trips of one command each:
// SUBSCRIBE and UNSUBSCRIBE, Asynq's GetTaskInfo (two), a GET of the stored
// outcome, the heartbeat's SET and DEL for every task, and the worker's
// three commands one by one.
var maxRedisPerAccount = map[string]int{
	"api/limiter": 1, "api/asynq": 2, "api/taskwait": 1,
	"worker/limiter": 1, "worker/taskwait": 2, "worker/asynq": 2,
}

// maxRedisTripsPerAccount: the API's four commands, the worker's pipeline,
// and the e-mails' two enqueues.
const maxRedisTripsPerAccount = 7

// maxAPIPostgresTripsPerAccount is what E5's API side spends on
// PostgreSQL: the one-statement check and the IN_PROGRESS mark. The
// outcome comes with the worker's announcement; reading it from PostgreSQL
// as well cost a third.
const maxAPIPostgresTripsPerAccount = 2

// E5 costs a handful of Redis commands per account, and its API side two
// round trips to PostgreSQL.
func TestE5_AccountCostsAHandfulOfRoundTrips(t *testing.T) {
	t.Parallel()
	url := dbtest.NewDatabase(t)
	d, err := db.Open(t.Context(), url, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, q := range []string{
		`INSERT INTO import_suppliers (code, country, document_root, migration_emails) VALUES ('DEMO', 'GB', 'imports/demo', true)`,
		`INSERT INTO products (code) VALUES ('P')`,
		`INSERT INTO tariffs (product_id, code) SELECT p.id, c FROM products p,
			unnest(ARRAY['E-1R-VAR-C', 'E-1R-FIX-24M-C', 'WH-RENT-STD', 'HP-STD', 'ELEC-1234-J', 'WATER_PRODUCT', 'LP-STD']) AS c`,
		`INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_name, company_number)
			SELECT id, 'BIZ-DEMO', 'LTD', 'Demo Ltd', '00001' FROM import_suppliers WHERE code = 'DEMO'`,
		`INSERT INTO business_contracts (business_id, supplier_id, identifier)
			SELECT id, supplier_id, 'BC-2024-0042' FROM businesses`,
		`INSERT INTO operations_teams (name) VALUES ('Ops')`,
	} {
		if _, err := d.Exec(q); err != nil {
			t.Fatalf("seed: %v\n%s", err, q)
		}
	}
	raw, err := os.ReadFile("../jobs/account/testdata/account.json")
	if err != nil {
		t.Fatal(err)
	}
	const accounts = 6
	for i := range accounts {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		m["external_account_number"] = fmt.Sprintf("R-%d", i)
		b, _ := json.Marshal(m)
		if _, err := d.Exec(`INSERT INTO import_processes (supplier_id, external_account_number, payload)
			SELECT id, $1, $2 FROM import_suppliers WHERE code = 'DEMO'`, m["external_account_number"], b); err != nil {
			t.Fatal(err)
		}
	}

	opt, err := redis.ParseURL(dbtest.NewRedis(t))
	if err != nil {
		t.Fatal(err)
	}
	counter := newRedisCounter()
	client := func(name string) *redis.Client {
		c := redis.NewClient(opt)
		c.AddHook(counter.hook(name))
		t.Cleanup(func() { c.Close() })
		return c
	}
	api, handler := client("api"), client("worker")
	log := slog.New(slog.DiscardHandler)
	w, err := New(Config{AccountConcurrency: 2, Concurrency: 1}, workDeps(t, d,
		countedConnOpt{asynq.RedisClientOpt{Addr: opt.Addr, DB: opt.DB, Password: opt.Password}, counter.hook("asynq-server")}, handler, log))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-ran })
	hub := taskwait.NewHub(api)
	t.Cleanup(func() { hub.Close() })
	apiDB, pgTrips := dbtest.Counted(t, url)
	svc := process.New(apiDB, api, taskwait.NewTasks(api, hub, log, nil), process.Config{Limit: 10, Log: log})

	counted := 0
	for i := range accounts {
		counter.reset()
		pgBefore := pgTrips.Load()
		start := time.Now()
		res, err := svc.Process(t.Context(), process.Request{ExternalAccountNumber: fmt.Sprintf("R-%d", i),
			ImportSupplierCode: "DEMO", OperationsTeamName: "Ops"}, nil)
		if err != nil || res.ServiceAccountNumber == "" {
			t.Fatalf("account %d: %+v, %v", i, res, err)
		}
		if i == 0 {
			continue // the first opens connections and loads the scripts
		}
		if d := time.Since(start); d >= time.Second {
			// A wait that outlasts the poll interval also polls (the
			// outcome, the task, its heartbeat): a loaded machine.
			t.Logf("account %d took %v, and polled: not counted", i, d)
			continue
		}
		counted++
		if n := pgTrips.Load() - pgBefore; n > maxAPIPostgresTripsPerAccount {
			t.Errorf("account %d: E5's API side made %d round trips to PostgreSQL, want at most %d", i, n, maxAPIPostgresTripsPerAccount)
		}
		commands, trips := counter.snapshot()
		server := 0
		for k, n := range commands {
			if strings.HasPrefix(k, "asynq-server/") {
				server += n
				delete(commands, k)
			}
		}
		beats := commands["worker/heartbeat"]
		delete(commands, "worker/heartbeat")
		roundTrips := 0
		for k, n := range trips {
			if !strings.HasPrefix(k, "asynq-server/") && k != "worker/heartbeat" {
				roundTrips += n
			}
		}
		t.Logf("account %d: commands %v in %d round trips; heartbeat %d; Asynq servers (polling included) %d", i, commands, roundTrips, beats, server)
		over := map[string]int{}
		for k, n := range commands {
			if n > maxRedisPerAccount[k] {
				over[k] = n
			}
		}
		if diff := cmp.Diff(map[string]int{}, over); diff != "" {
			t.Errorf("account %d: commands over %v (-want +got):\n%s", i, maxRedisPerAccount, diff)
		}
		if roundTrips > maxRedisTripsPerAccount {
			t.Errorf("account %d: %d round trips to Redis %v, want at most %d", i, roundTrips, trips, maxRedisTripsPerAccount)
		}
	}
	if counted == 0 {
		t.Skip("every account took a second or more (a loaded machine): nothing counted")
	}
}
