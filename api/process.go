package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/process"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// processAccount is E5: it waits for the account:process task and answers
// 201 with the service account number.
func (s *Server) processAccount(c *gin.Context) {
	req, err := s.readProcessRequest(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.process.Process(c.Request.Context(), req, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}

// readProcessRequest reads and parses the body of E5, and notes its account
// for the request log.
func (s *Server) readProcessRequest(c *gin.Context) (process.Request, error) {
	body, err := s.readJSON(c)
	if err != nil {
		return process.Request{}, err
	}
	req, err := process.ParseRequest(body)
	if err != nil {
		return process.Request{}, err
	}
	validate.NoteSubject(c.Request.Context(), req.ImportSupplierCode, req.ExternalAccountNumber)
	return req, nil
}
