package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/gin-gonic/gin"
)

// writeJSON answers v with status as every successful REST answer is
// written: one JSON document ended by a newline, as the error bodies are
// (writeProblem), so that a client printing it leaves the terminal's prompt
// on a line of its own, and without HTML escaping, which would show a note's
// "<" or "&" as \u003c or \u0026 to a client that reads the text.
//
// A v that is a jsonAppender writes its own encoding (E3's normalised
// account, the largest answer the API writes per request). The buffer is
// pooled: c.Data has copied it to the connection when it returns.
func writeJSON(c *gin.Context, status int, v any) {
	bp := answerBuffers.Get().(*[]byte)
	defer putAnswerBuffer(bp)
	var err error
	if a, ok := v.(jsonAppender); ok {
		*bp, err = a.AppendJSON((*bp)[:0])
		*bp = append(*bp, '\n')
	} else {
		b := bytes.NewBuffer((*bp)[:0])
		enc := json.NewEncoder(b)
		enc.SetEscapeHTML(false)
		err = enc.Encode(v)
		*bp = b.Bytes()
	}
	if err != nil {
		writeError(c, fmt.Errorf("encode answer: %w", err))
		return
	}
	c.Data(status, "application/json; charset=utf-8", *bp)
}

// jsonAppender is an answer that appends its own JSON encoding to a buffer:
// the bytes a json.Encoder with SetEscapeHTML(false) writes for it, without
// the newline.
type jsonAppender interface {
	AppendJSON([]byte) ([]byte, error)
}

// answerBuffers holds the buffers answers are encoded into.
var answerBuffers = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledAnswer is the largest buffer kept: the buffer of an unusually
// large answer (a long list) is left to the garbage collector.
const maxPooledAnswer = 64 << 10

func putAnswerBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledAnswer {
		*bp = (*bp)[:0]
		answerBuffers.Put(bp)
	}
}
