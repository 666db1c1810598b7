package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/db/dbtest"
)

// Benchmarks of E3 and E4 (docs/performance.md), each against a baseline
// measured in the same run with the same load: 16 goroutines over b.N
// requests, the ~4 KB account fixture, keep-alive connections. Run them with
//
//	go test ./cmd/importd -run '^$' -bench 'E3|E4' -benchtime 2000x -count 3
//
// and compare req/s: E3 should reach half of its baseline, E4 60% of its.

// importsBenchWorkers is how many requests are in flight at once.
const importsBenchWorkers = 16

// importsBenchClient keeps a connection per worker alive between requests.
func importsBenchClient(b *testing.B) *http.Client {
	tr := &http.Transport{MaxIdleConns: 4 * importsBenchWorkers, MaxIdleConnsPerHost: 4 * importsBenchWorkers, IdleConnTimeout: time.Minute}
	b.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// importsBenchRun calls fn(i) for every i in [0, b.N) from 16 goroutines,
// timing only that, and reports the rate as req/s.
func importsBenchRun(b *testing.B, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	b.ResetTimer()
	for range importsBenchWorkers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N || failed.Load() != nil {
					return
				}
				if err := fn(i); err != nil {
					failed.Store(&err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// importsBenchPost sends body and drains the answer, which must have status want.
func importsBenchPost(c *http.Client, url, tok string, body []byte, want int) error {
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Token "+tok)
	}
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("status %d, want %d: %s", res.StatusCode, want, raw)
	}
	return nil
}

// importsBenchWarm sends warmup(i) for every worker i from importsBenchWorkers
// goroutines at once, as BenchmarkE4BaselinePlainUpsert warms its pool, so
// that every measured run starts with all its keep-alive connections, and
// the server with all its database connections, open. Warming one request
// after another would open a single connection and leave the others to be
// opened (and their statements prepared) inside the timed loop.
func importsBenchWarm(b *testing.B, warmup func(i int) error) {
	b.Helper()
	errs := make([]error, importsBenchWorkers)
	var wg sync.WaitGroup
	for i := range importsBenchWorkers {
		wg.Go(func() { errs[i] = warmup(i) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
}

// importsBenchFixture is the fixture as a client sends it (with its
// whitespace), its account number replaced by "%s".
func importsBenchFixture(b *testing.B) string {
	raw, err := os.ReadFile("../../jobs/account/testdata/account.json")
	if err != nil {
		b.Fatal(err)
	}
	const number = `"external_account_number": "A-00012345"`
	if !bytes.Contains(raw, []byte(number)) {
		b.Fatalf("the fixture has no %s", number)
	}
	raw = bytes.ReplaceAll(raw, []byte("%"), []byte("%%"))
	return string(bytes.Replace(raw, []byte(number), []byte(`"external_account_number": %q`), 1))
}

// importsBenchRunID makes the account numbers of every run of a benchmark
// distinct, so that each E4 request inserts a new row.
var importsBenchRunID atomic.Int64

func importsBenchBodies(b *testing.B, template string) [][]byte {
	run := importsBenchRunID.Add(1)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, template, fmt.Sprintf("BENCH-%d-%07d", run, i))
	}
	return bodies
}

func BenchmarkE3Validate(b *testing.B) {
	e := newImportsEnv(b)
	c := importsBenchClient(b)
	body := fmt.Appendf(nil, importsBenchFixture(b), "A-00012345")
	b.SetBytes(int64(len(body)))
	url := e.s.base + pathValidateAccount
	importsBenchWarm(b, func(int) error { return importsBenchPost(c, url, e.tok, body, http.StatusOK) })
	importsBenchRun(b, func(int) error { return importsBenchPost(c, url, e.tok, body, http.StatusOK) })
}

// BenchmarkE3BaselineBareGin is the least an E3 could cost: a bare Gin
// handler that reads the body, decodes it into map[string]any and answers
// 200 {}.
func BenchmarkE3BaselineBareGin(b *testing.B) {
	r := gin.New()
	r.POST(pathValidateAccount, func(c *gin.Context) {
		raw, err := io.ReadAll(c.Request.Body)
		var m map[string]any
		if err == nil {
			err = json.Unmarshal(raw, &m)
		}
		if err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"detail": err.Error()})
			return
		}
		c.JSON(http.StatusOK, gin.H{})
	})
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	c := importsBenchClient(b)
	body := fmt.Appendf(nil, importsBenchFixture(b), "A-00012345")
	b.SetBytes(int64(len(body)))
	url := srv.URL + pathValidateAccount
	importsBenchWarm(b, func(int) error { return importsBenchPost(c, url, "", body, http.StatusOK) })
	importsBenchRun(b, func(int) error { return importsBenchPost(c, url, "", body, http.StatusOK) })
}

// BenchmarkE4Stage stages a new account with every request.
func BenchmarkE4Stage(b *testing.B) {
	e := newImportsEnv(b)
	c := importsBenchClient(b)
	template := importsBenchFixture(b)
	bodies := importsBenchBodies(b, template)
	b.SetBytes(int64(len(bodies[0])))
	url := e.s.base + pathStageAccount
	importsBenchWarm(b, func(i int) error {
		return importsBenchPost(c, url, e.tok, fmt.Appendf(nil, template, fmt.Sprint("WARM-", i)), http.StatusCreated)
	})
	importsBenchRun(b, func(i int) error { return importsBenchPost(c, url, e.tok, bodies[i], http.StatusCreated) })
}

// BenchmarkE4StageRefused stages a new account with an invalid phone
// number with every request: each is refused (400) and recorded as the
// account's refusal for the migration progress page, a new row each.
func BenchmarkE4StageRefused(b *testing.B) {
	e := newImportsEnv(b)
	c := importsBenchClient(b)
	const mobile = `"mobile": "+44 7911 123456"`
	template := importsBenchFixture(b)
	if !strings.Contains(template, mobile) {
		b.Fatalf("the fixture has no %s", mobile)
	}
	template = strings.Replace(template, mobile, `"mobile": "12"`, 1)
	bodies := importsBenchBodies(b, template)
	b.SetBytes(int64(len(bodies[0])))
	url := e.s.base + pathStageAccount
	importsBenchWarm(b, func(i int) error {
		return importsBenchPost(c, url, e.tok, fmt.Appendf(nil, template, fmt.Sprint("WARM-", i)), http.StatusBadRequest)
	})
	importsBenchRun(b, func(i int) error { return importsBenchPost(c, url, e.tok, bodies[i], http.StatusBadRequest) })
}

// BenchmarkE4BaselinePlainUpsert writes the rows E4 writes, the normalised
// payload under a new account number each, with one plain upsert each from
// 16 goroutines over 16 connections: the least an E4 could cost. The upsert
// runs unprepared, on the *sqlx.DB under db.DB, as it always has: E4 itself
// runs its statement prepared.
func BenchmarkE4BaselinePlainUpsert(b *testing.B) {
	e := newImportsEnv(b)
	ctx := context.Background()
	// The normalised payload, as E4 stores it.
	v := e.s.do(b, "POST", pathValidateAccount, e.tok, fmt.Sprintf(importsBenchFixture(b), "A-00012345"))
	if v.Status != http.StatusOK {
		b.Fatalf("E3: %d %s", v.Status, v.Raw)
	}
	const number = `"external_account_number":"A-00012345"`
	if !bytes.Contains(v.Raw, []byte(number)) {
		b.Fatalf("the normalised payload has no %s: %s", number, v.Raw)
	}
	template := string(bytes.Replace(bytes.ReplaceAll(v.Raw, []byte("%"), []byte("%%")), []byte(number), []byte(`"external_account_number":%q`), 1))
	payloads := importsBenchBodies(b, template)
	eans := make([]string, b.N)
	for i, p := range payloads {
		var x struct {
			N string `json:"external_account_number"`
		}
		if err := json.Unmarshal(p, &x); err != nil {
			b.Fatal(err)
		}
		eans[i] = x.N
	}
	var supplierID int64
	if err := e.s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		b.Fatal(err)
	}
	e.s.db.SetMaxOpenConns(importsBenchWorkers)
	e.s.db.SetMaxIdleConns(importsBenchWorkers)
	const upsert = `INSERT INTO import_processes (supplier_id, external_account_number, payload) VALUES ($1, $2, $3)
		ON CONFLICT (supplier_id, external_account_number) DO UPDATE SET payload = EXCLUDED.payload`
	importsBenchWarm(b, func(i int) error {
		_, err := e.s.db.DB.ExecContext(ctx, upsert, supplierID, fmt.Sprint("WARM-", i), payloads[0])
		return err
	})
	b.SetBytes(int64(len(payloads[0])))
	importsBenchRun(b, func(i int) error {
		_, err := e.s.db.DB.ExecContext(ctx, upsert, supplierID, eans[i], payloads[i])
		return err
	})
}

// BenchmarkE4BaselinePgbench runs BenchmarkE4BaselinePlainUpsert's upsert
// from pgbench, 16 clients, each row a new account number and the
// normalised ~4 KB payload: the database's own speed at the rows E4
// writes, without Go's, for E4's ratio to the database alone. pgbench runs
// with the benchmark database's settings (dbtest.PgbenchConn).
func BenchmarkE4BaselinePgbench(b *testing.B) {
	e := newImportsEnv(b)
	v := e.s.do(b, "POST", pathValidateAccount, e.tok, fmt.Sprintf(importsBenchFixture(b), "A-00012345"))
	if v.Status != http.StatusOK {
		b.Fatalf("E3: %d %s", v.Status, v.Raw)
	}
	var supplierID int64
	if err := e.s.db.Get(&supplierID, `SELECT id FROM import_suppliers WHERE code = 'DEMO'`); err != nil {
		b.Fatal(err)
	}
	// Each transaction a new number: the client's id and a counter of its
	// own, as each of the plain upsert's rows has a number of its own.
	script := filepath.Join(b.TempDir(), "e4_upsert.pgbench")
	const upsert = `\set k :k + 1
INSERT INTO import_processes (supplier_id, external_account_number, payload)
VALUES (:sup, 'PGB-' || :client_id::text || '-' || :k::text, :doc::jsonb)
ON CONFLICT (supplier_id, external_account_number) DO UPDATE SET payload = EXCLUDED.payload;
`
	if err := os.WriteFile(script, []byte(upsert), 0o644); err != nil {
		b.Fatal(err)
	}
	perClient := max(1, (b.N+importsBenchWorkers-1)/importsBenchWorkers)
	b.SetBytes(int64(len(v.Raw)))
	tps, _ := dbtest.Pgbench(b, e.s.env["DATABASE_URL"], script, importsBenchWorkers, perClient,
		map[string]string{"sup": fmt.Sprint(supplierID), "k": "0", "doc": string(v.Raw)})
	b.ReportMetric(tps, "req/s")
	b.ReportMetric(0, "ns/op")
}
