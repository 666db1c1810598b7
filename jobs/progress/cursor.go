package progress

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// The sources of the failed accounts, in the order of a page among rows
// of the same time: refusals before processes.
const (
	srcProcess = 0 // a failed import process
	srcRefusal = 1 // an account refused at staging (staging_refusals)
)

// cursor is where a page of failed accounts starts: after the row id of
// source src that failed at at, in the order at DESC, src DESC, id DESC.
// Its text form is "<microseconds since 1970>.<process id>" for a process
// and "<microseconds since 1970>.r<refusal id>" for a refusal, the time at
// the precision of timestamptz.
type cursor struct {
	at  time.Time
	src int
	id  int64
}

func (c cursor) String() string {
	prefix := ""
	if c.src == srcRefusal {
		prefix = "r"
	}
	return strconv.FormatInt(c.at.UnixMicro(), 10) + "." + prefix + strconv.FormatInt(c.id, 10)
}

var errCursor = errors.New("before is the next cursor of a previous page, as the summary gives it")

// parseCursor reads the text form of a cursor; "" is the first page, the
// zero cursor.
func parseCursor(s string) (cursor, error) {
	if s == "" {
		return cursor{}, nil
	}
	us, id, ok := strings.Cut(s, ".")
	src := srcProcess
	if rest, refusal := strings.CutPrefix(id, "r"); refusal {
		src, id = srcRefusal, rest
	}
	if !ok || !digits(us) || !digits(id) {
		return cursor{}, errCursor
	}
	micros, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	// Beyond year 9999 PostgreSQL has no timestamptz to compare with.
	if err1 != nil || err2 != nil || n <= 0 || micros > maxCursorMicros {
		return cursor{}, errCursor
	}
	return cursor{at: time.UnixMicro(micros).UTC(), src: src, id: n}, nil
}

// maxCursorMicros is 9999-12-31T23:59:59.999999Z.
var maxCursorMicros = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()

func digits(s string) bool {
	if s == "" || len(s) > 19 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
