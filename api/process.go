package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/process"
)

// processAccount is E5: it waits for the account:process task and answers
// 201 with the service account number.
func (s *Server) processAccount(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	req, err := process.ParseRequest(body)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.process.Process(c.Request.Context(), req, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	c.JSON(http.StatusCreated, res)
}
