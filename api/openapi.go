package api

import (
	_ "embed"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"sigs.k8s.io/yaml"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// SchemaPath is where the OpenAPI document is served, without a token.
const SchemaPath = "/v1/data-import/schema/"

// OpenAPI is the OpenAPI 3.0.3 document of every endpoint, as kept in the
// repository (api/openapi.yaml). cmd/importd's tests check real answers of
// the running service against it, so it cannot drift from the code.
//
//go:embed openapi.yaml
var OpenAPI []byte

// openAPIJSON is the same document as JSON, converted once.
var openAPIJSON = func() []byte {
	b, err := yaml.YAMLToJSON(OpenAPI)
	if err != nil {
		panic("api/openapi.yaml is not valid YAML: " + err.Error())
	}
	return b
}()

// serveSchema answers the document as YAML, or as JSON with ?format=json.
func serveSchema(c *gin.Context) {
	format := c.Query("format")
	if format == "" && strings.Contains(c.GetHeader("Accept"), "application/json") {
		format = "json"
	}
	switch format {
	case "", "yaml":
		c.Data(http.StatusOK, "application/yaml; charset=utf-8", OpenAPI)
	case "json":
		c.Data(http.StatusOK, "application/json; charset=utf-8", openAPIJSON)
	default:
		writeError(c, problem.Invalidf("invalid_choice", "format", "format must be yaml or json."))
	}
}
