package postimport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// countedService returns a Service on b's database and document store
// whose pool has one connection, and the count of that connection's round
// trips. Its clock is testNow, for the supplier's time zone too, so that
// the zone it reads once is never read again.
func (b *bundle) countedService(t *testing.T) (*Service, *atomic.Int64) {
	t.Helper()
	counted, writes := dbtest.Counted(t, b.url)
	counted.SetMaxOpenConns(1)
	svc := New(counted, b.docs)
	svc.now = func() time.Time { return testNow }
	svc.zones = newZones(counted, svc.now)
	return svc, writes
}

// The usual request of E6 (notes the account has none of, one of them
// posted twice) and of E8 (statements the account has none of) costs one
// round trip to PostgreSQL once the connection has prepared its
// statements: no BEGIN, lock, read or COMMIT of their own.
func TestNotesAndStatements_UsualRequestCostsOneRoundTrip(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct {
		name string
		// send runs the endpoint on svc for the account ean and checks
		// its answer.
		send func(t *testing.T, svc *Service, ean string)
		// stored counts what the account has.
		stored string
		want   int
	}{
		{
			name: "E6 notes",
			send: func(t *testing.T, svc *Service, ean string) {
				res, err := svc.CreateNotes(context.Background(), notesBody(t, ean, obj{"body": "First"},
					obj{"body": "Second", "created_at": "2025-01-11T10:00:00Z", "is_pinned": true}, obj{"body": "First"}), visible)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, r := range res {
					got = append(got, r.Status)
				}
				want := []string{note.StatusCreated, note.StatusCreated, note.StatusAlreadyExists}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("statuses (-want +got):\n%s", diff)
				}
			},
			stored: `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1`,
			want:   2,
		},
		{
			name: "E8 statements",
			send: func(t *testing.T, svc *Service, ean string) {
				_, err := svc.CreateStatements(context.Background(), stBody(t, ean,
					statement("S1", "2025-01-01", "2025-02-01"), statement("S2", "2025-02-01", "2025-03-01")), visible)
				if err != nil {
					t.Fatal(err)
				}
			},
			stored: `SELECT count(*) FROM historical_statements h JOIN accounts a ON a.id = h.account_id WHERE a.external_account_number = $1`,
			want:   2,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			svc, writes := b.countedService(t)
			// The first request prepares the connection's statements.
			tc.send(t, svc, b.newAccount(t, acct{}))
			ean := b.newAccount(t, acct{})
			before := writes.Load()
			tc.send(t, svc, ean)
			if n := writes.Load() - before; n != 1 {
				t.Errorf("the request cost %d round trips, want 1", n)
			}
			if n := b.count(t, tc.stored, ean); n != tc.want {
				t.Errorf("%d stored, want %d", n, tc.want)
			}
		})
	}
}

// post_notes, called on its own, writes the notes, documents included,
// only when no note of the account has one of the posted bodies; otherwise
// it writes nothing and the request is decided again under the lock.
func TestNotes_DirectWriteChecksThatNoPostedBodyExists(t *testing.T) {
	t.Parallel()
	b := setup(t)
	str := func(s string) *string { return &s }
	notes := []note.Note{
		{Body: str("One"), DocumentPaths: []note.DocumentPath{{DocumentPath: "a.pdf"}}},
		{Body: str("Two")},
	}
	cases := []struct {
		name   string
		before []string // the bodies of the account's notes
		ean    string   // "" for a new account
		wrote  bool
		err    error
		notes  int // the account's notes after the write
		docs   int // and their documents
	}{
		{name: "no note of the account", wrote: true, notes: 2, docs: 1},
		{name: "a note with another body", before: []string{"Three"}, wrote: true, notes: 3, docs: 1},
		{name: "a note with a posted body", before: []string{"Two"}, notes: 1},
		{name: "a document-only note, and none posted", before: []string{""}, wrote: true, notes: 3, docs: 1},
		{name: "no such account", ean: "NO-SUCH-ACCOUNT", err: note.ErrNoAccount},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := tc.ean
			if ean == "" {
				ean = b.newAccount(t, acct{})
			}
			for _, text := range tc.before {
				if _, err := b.db.Exec(`INSERT INTO notes (account_id, body, created_at) SELECT id, $2, now()
					FROM accounts WHERE external_account_number = $1`, ean, text); err != nil {
					t.Fatal(err)
				}
			}
			_, wrote, err := note.Post(context.Background(), b.db, supplierCode, ean, notes, testNow)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			got := []any{wrote,
				b.count(t, `SELECT count(*) FROM notes n JOIN accounts a ON a.id = n.account_id WHERE a.external_account_number = $1`, ean),
				b.count(t, `SELECT count(*) FROM note_documents d JOIN notes n ON n.id = d.note_id JOIN accounts a ON a.id = n.account_id
					WHERE a.external_account_number = $1`, ean)}
			if diff := cmp.Diff([]any{tc.wrote, tc.notes, tc.docs}, got); diff != "" {
				t.Errorf("wrote, notes, documents (-want +got):\n%s", diff)
			}
		})
	}
}

// post_statements, called on its own, writes all the statements when the
// account has none of their ids, and none otherwise.
func TestStatements_DirectWriteIsAllOrNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := func(ean string) *StatementsRequest {
		req, err := ParseStatements(stBody(t, ean, statement("S1", "2025-01-01", "2025-02-01"),
			statement("S2", "2025-02-01", "2025-03-01")), testNow)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	cases := []struct {
		name    string
		before  string // a statement id the account has, or ""
		ean     string // "" for a new account
		written int
		code    string // the error's, or ""
		stored  int
	}{
		{name: "no statement of the account", written: 2, stored: 2},
		{name: "a statement with another id", before: "S0", written: 2, stored: 3},
		{name: "a statement with a posted id", before: "S2", stored: 1},
		{name: "no such account", ean: "NO-SUCH-ACCOUNT", code: CodeAccountNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ean := tc.ean
			if ean == "" {
				ean = b.newAccount(t, acct{})
			}
			if tc.before != "" {
				if _, err := b.db.Exec(`INSERT INTO historical_statements (account_id, statement_id, bill_period_from_date, bill_period_to_date)
					SELECT id, $2, '2024-01-01', '2024-02-01' FROM accounts WHERE external_account_number = $1`, ean, tc.before); err != nil {
					t.Fatal(err)
				}
			}
			written, err := postStatements(context.Background(), b.db, r(ean))
			if tc.code != "" {
				if p, ok := problem.As(err); !ok || p.Code != tc.code {
					t.Fatalf("error %v, want %s", err, tc.code)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			got := []int{written, b.count(t, `SELECT count(*) FROM historical_statements h JOIN accounts a ON a.id = h.account_id
				WHERE a.external_account_number = $1`, ean)}
			if diff := cmp.Diff([]int{tc.written, tc.stored}, got); diff != "" {
				t.Errorf("written, stored (-want +got):\n%s", diff)
			}
		})
	}
}
