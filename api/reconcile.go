package api

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/reconcile"
)

// HeaderSupplierCountry names the supplier's country on the reconciliation
// stream: the country in which the cohort's side reads national phone
// numbers and postcodes (reconcile.FromCohortLine).
const HeaderSupplierCountry = "Import-Supplier-Country"

// reconciliation is an extension beyond the spec: the summaries of the
// supplier's imported accounts (reconcile.Summary), in byte order of their
// external account numbers, after ?after= when given. It is authenticated
// and scoped like E11 to E13 (another supplier's accounts answer 404 as a
// missing supplier does) and streamed the same way: a JSON array written
// item by item, so memory stays flat. The store reads a page of accounts
// at a time without holding a transaction between pages, so a slow reader
// holds no database connection while it reads.
func (s *Server) reconciliation(c *gin.Context) {
	store := reconcile.NewStore(s.db)
	sup, err := store.Supplier(c.Request.Context(), c.Param("supplier"), principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	w := bufio.NewWriterSize(deadlineWriter{http.NewResponseController(c.Writer), c.Writer, s.cfg.StreamWriteTimeout}, 32<<10)
	enc := json.NewEncoder(w)
	started := false
	// The status waits for the first summary, so that a failure of the
	// first page is answered as an error, not as a broken 200.
	begin := func() error {
		started = true
		c.Header("Content-Type", "application/json; charset=utf-8")
		c.Header(HeaderSupplierCountry, sup.Country)
		c.Status(http.StatusOK)
		return w.WriteByte('[')
	}
	err = store.Stream(c.Request.Context(), sup, c.Query("after"), func(sum reconcile.Summary) error {
		if !started {
			if err := begin(); err != nil {
				return err
			}
		} else if err := w.WriteByte(','); err != nil {
			return err
		}
		return enc.Encode(sum)
	})
	if err != nil && !started {
		writeError(c, err)
		return
	}
	if err != nil {
		// The status line is gone; abort the connection so that the client
		// sees a broken response, not a valid-looking short list.
		logger(c).WarnContext(c.Request.Context(), "reconciliation stream stopped",
			"request_id", requestID(c), "error", err.Error())
		_ = w.Flush()
		panic(http.ErrAbortHandler)
	}
	if !started {
		_ = begin()
	}
	_ = w.WriteByte(']')
	_ = w.Flush()
}
