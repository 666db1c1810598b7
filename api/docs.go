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

// serveDocs answers the files of api/docs under DocsPath; an unknown file
// gets the section 7 not-found answer.
func serveDocs(c *gin.Context) {
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
