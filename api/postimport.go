package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// createNotes is E6: 201 with one result per posted note.
func (s *Server) createNotes(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.postImport.CreateNotes(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}

// createTransactions is E7. Its options are query parameters, which the
// domain code reads with the body so that problems in both are reported
// together; a refusal carries E7's extra fields in the error's Extra.
func (s *Server) createTransactions(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.postImport.CreateTransactions(c.Request.Context(), body, c.Request.URL.Query(), principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}

// createStatements is E8: 201 with the validated statements (the spec
// leaves 200 or 201 open; 201 says that something was created).
func (s *Server) createStatements(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.postImport.CreateStatements(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}
