package api

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// codeInvalidEncoding refuses a path or query parameter that is not UTF-8
// text; a NUL in one is validate.CodeNullCharacters, as in a body.
const codeInvalidEncoding = "invalid_encoding"

// paramNames are the names that api/openapi.yaml gives the path parameters
// whose route names are shorter, so that attr names what the caller reads.
var paramNames = map[string]string{"ean": "external_account_number"}

// refuseMalformedParams answers 400 to a request whose path parameters or
// query parameters (names or values) are not UTF-8 or hold a NUL, naming
// each such parameter in errors[].attr. Those are the two things a text
// column cannot take: PostgreSQL refuses them in any text it is sent, so
// they reached it as the argument of a lookup and came back as a 500
// internal_error (/account-transfer-status/ATTK/%FF%FE/, ?after=%00),
// which pages the on-call through ImportdHighErrorRate. Other control
// characters pass: E4 stores an account number with a tab in it, and E10
// must find it.
func refuseMalformedParams(c *gin.Context) {
	var errs problem.List
	// check reports the first of values that is not UTF-8 or holds a NUL,
	// once per parameter.
	check := func(kind, name string, values ...string) {
		for _, v := range values {
			switch {
			case !utf8.ValidString(v):
				errs.Add(name, codeInvalidEncoding, "The %s parameter %s is not UTF-8 text.", kind, name)
				return
			case strings.IndexByte(v, 0) >= 0:
				errs.Add(name, validate.CodeNullCharacters, "The %s parameter %s holds a NUL character (U+0000), which is not allowed.", kind, name)
				return
			}
		}
	}
	for _, p := range c.Params {
		name := p.Key
		if n, ok := paramNames[name]; ok {
			name = n
		}
		check("path", name, p.Value)
	}
	query := c.Request.URL.Query()
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		check("query", k, append([]string{k}, query[k]...)...)
	}
	switch len(errs) {
	case 0:
		return
	case 1:
		writeError(c, errs.Err(errs[0].Code, errs[0].Detail))
	default:
		writeError(c, errs.Err("invalid", "Some parameters of the request are not UTF-8 text or hold a NUL character."))
	}
}
