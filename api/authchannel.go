package api

import (
	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/auth"
)

// withAuthChannel says, for the count of failed authentications, that the
// credentials of the requests it serves come through ch: the migration
// page checks API keys and the MONITORING_USER login as the API and the
// dashboard do, and its failures would otherwise be counted as theirs.
func withAuthChannel(ch auth.Channel) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request = c.Request.WithContext(auth.WithChannel(c.Request.Context(), ch))
		c.Next()
	}
}
