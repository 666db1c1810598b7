package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/accountview"
)

// accountDetail is an extension beyond the spec: one account as the
// service holds it (accountview.View, the document `importctl account show
// --json` prints), from its import process to its ledger balance, for a
// migration team that checks an import with its API key and has no
// database login. Scoped like E10: another supplier's account answers 404
// as a missing supplier does. It reads in one read-only snapshot.
func (s *Server) accountDetail(c *gin.Context) {
	v, err := accountview.LoadVisible(c.Request.Context(), s.db, c.Param("supplier"), c.Param("ean"), principal(c).CanSee)
	if err != nil {
		writeError(c, err)
		return
	}
	writeJSON(c, http.StatusOK, v)
}
