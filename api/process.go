package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// processAccount is E5: it waits for the account:process task and answers
// 201 with the service account number.
func (s *Server) processAccount(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.process.ProcessBody(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}
