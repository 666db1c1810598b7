package api

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/gin-gonic/gin"
)

// writeJSON answers v with status as every successful REST answer is
// written: one JSON document ended by a newline, as the error bodies are
// (writeProblem), so that a client printing it leaves the terminal's prompt
// on a line of its own, and without HTML escaping, which would show a note's
// "<" or "&" as \u003c or \u0026 to a client that reads the text.
func writeJSON(c *gin.Context, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(c, fmt.Errorf("encode answer: %w", err))
		return
	}
	c.Data(status, "application/json; charset=utf-8", b.Bytes())
}
