package api

import (
	"embed"
	"io/fs"
	"net/http"
	"path"

	"github.com/gin-gonic/gin"
)

// DocsPath is where the interactive API page (Swagger UI, api/docs) is
// served, without a token.
const DocsPath = "/v1/data-import/docs/"

//go:embed docs/index.html docs/init.js docs/swagger-ui-bundle.js docs/swagger-ui.css docs/favicon-32x32.png
var docsFS embed.FS

// docsFiles is api/docs with the directory prefix removed.
var docsFiles = func() fs.FS {
	sub, err := fs.Sub(docsFS, "docs")
	if err != nil {
		panic(err)
	}
	return sub
}()

// docsPolicy is the Content-Security-Policy of the API page: it runs only
// its own script files and talks only to its own origin, so that a script
// injected through the document (or a file served by mistake) cannot run
// or send anything elsewhere. Swagger UI sets inline styles, and draws
// icons from data: URLs; the validator badge it would load from another
// origin is refused.
const docsPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveDocs answers the files of api/docs under DocsPath, with headers that
// keep the page out of frames (clickjacking "Try it out" with a victim's
// token) and every file read as its declared type; an unknown file gets the
// section 7 not-found answer.
func serveDocs(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", docsPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	name := path.Clean("/" + c.Param("file"))[1:]
	if name == "" {
		name = "index.html"
	}
	if _, err := fs.Stat(docsFiles, name); err != nil {
		notFound(c)
		return
	}
	c.Header("Cache-Control", "public, max-age=3600")
	if name == "index.html" {
		// http.FileServer would redirect index.html to its directory.
		page, _ := fs.ReadFile(docsFiles, name)
		c.Data(http.StatusOK, "text/html; charset=utf-8", page)
		return
	}
	c.FileFromFS(name, http.FS(docsFiles))
}
