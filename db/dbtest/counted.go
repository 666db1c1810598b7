package dbtest

import (
	"database/sql"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
)

// Counted opens a pool to url, as db.Open does but without its checks,
// whose connections count their writes in trips. lib/pq writes once per
// round trip (it flushes a request, then waits for the answer), so the
// count is the number of round trips to PostgreSQL: the tests that hold a
// request to a handful of them read it. The pool is closed when the test
// ends.
func Counted(t testing.TB, url string) (d *db.DB, trips *atomic.Int64) {
	t.Helper()
	trips = new(atomic.Int64)
	conn, err := pq.NewConnector(url)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	conn.Dialer(countingDialer{writes: trips})
	d = db.New(sqlx.NewDb(sql.OpenDB(conn), "postgres"))
	t.Cleanup(func() { d.Close() })
	return d, trips
}

// countingDialer dials connections that count their writes.
type countingDialer struct{ writes *atomic.Int64 }

func (c countingDialer) Dial(network, address string) (net.Conn, error) {
	return c.DialTimeout(network, address, 0)
}

func (c countingDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	conn, err := (&net.Dialer{Timeout: timeout}).Dial(network, address)
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: conn, writes: c.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}
