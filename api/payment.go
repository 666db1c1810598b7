package api

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// createAccountPaymentInstruction is E9: it waits for the vendor
// verification task and answers 201.
func (s *Server) createAccountPaymentInstruction(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.payment.CreateForAccount(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}

// createBusinessPaymentInstruction is E2, as E9 for a business.
func (s *Server) createBusinessPaymentInstruction(c *gin.Context) {
	body, err := s.readJSON(c)
	if err != nil {
		writeError(c, err)
		return
	}
	res, err := s.payment.CreateForBusiness(c.Request.Context(), body, principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusCreated, res)
}
