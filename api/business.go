package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// createBusiness is E1: it answers 201 with the service business id.
func (s *Server) createBusiness(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.business.Create(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}
