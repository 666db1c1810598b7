package api

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// validateAccount is E3: it answers the validated, normalised account.
func (s *Server) validateAccount(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	acc, err := s.imports.Validate(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, acc)
}

// stageAccount is E4: 201 on first staging, 200 when the data is replaced.
func (s *Server) stageAccount(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.imports.Stage(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(c, status, res)
}

// processStatus is E10.
func (s *Server) processStatus(c *gin.Context) {
	st, err := s.imports.Status(c.Request.Context(), c.Param("supplier"), c.Param("ean"), principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, st)
}

// listProcesses serves E11 to E13. The JSON array is written item by item
// as pages come from the database (imports.List), so memory stays flat
// however long the list is, and no database connection waits on the client.
func (s *Server) listProcesses(which imports.Which) gin.HandlerFunc {
	return func(c *gin.Context) {
		page, err := pageOf(c)
		if err != nil {
			writeError(c, err)
			return
		}
		w := bufio.NewWriterSize(deadlineWriter{http.NewResponseController(c.Writer), c.Writer, s.cfg.StreamWriteTimeout}, 32<<10)
		enc := json.NewEncoder(w)
		started := false
		err = s.imports.List(c.Request.Context(), c.Param("supplier"), which, page, principal(c).CanSee, func(it imports.Item) error {
			if !started {
				c.Header("Content-Type", "application/json; charset=utf-8")
				c.Status(http.StatusOK)
				started = true
				if err := w.WriteByte('['); err != nil {
					return err
				}
			} else if err := w.WriteByte(','); err != nil {
				return err
			}
			return enc.Encode(it)
		})
		if err != nil {
			if !started {
				writeError(c, err)
				return
			}
			// The status line is gone; abort the connection so the client
			// sees a broken response, not a valid-looking short list.
			_ = w.Flush()
			panic(http.ErrAbortHandler)
		}
		if !started {
			c.Header("Content-Type", "application/json; charset=utf-8")
			c.Status(http.StatusOK)
			_, _ = w.WriteString("[")
		}
		_, _ = w.WriteString("]")
		_ = w.Flush()
	}
}

// deadlineWriter gives each write to the connection its own deadline. A
// client that stops reading makes a write fail after d instead of holding
// its request (and its slot of MAX_IN_FLIGHT_PER_KEY) for ever. The last deadline is
// left in place so that net/http's final flush is bounded too; the next
// request on the connection clears it (clearWriteDeadline).
type deadlineWriter struct {
	rc *http.ResponseController
	w  io.Writer
	d  time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	if err := w.rc.SetWriteDeadline(time.Now().Add(w.d)); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

func pageOf(c *gin.Context) (imports.Page, error) {
	p := imports.Page{After: c.Query("after")}
	if l, ok := c.GetQuery("limit"); ok {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > imports.MaxPageLimit {
			return p, problem.Invalidf("invalid", "limit", "limit must be an integer from 1 to %d.", imports.MaxPageLimit)
		}
		p.Limit = n
	}
	return p, nil
}
