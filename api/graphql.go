package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
	graphql "github.com/graph-gophers/graphql-go"

	"github.com/bulkimport/bulkimport/jobs/auth"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// tokenSchema is the GraphQL schema of the token endpoint (spec section 5).
const tokenSchema = `
	schema { query: Query mutation: Mutation }
	scalar GenericScalar
	type Query { ping: String! }
	input ObtainJSONWebTokenInput {
		APIKey: String
		refreshToken: String
	}
	type ObtainServiceJSONWebToken {
		token: String!
		payload: GenericScalar!
		refreshToken: String!
		refreshExpiresIn: Int!
	}
	type Mutation {
		obtainServiceToken(input: ObtainJSONWebTokenInput!): ObtainServiceJSONWebToken
	}
`

// genericScalar carries the token's claims as a JSON object.
type genericScalar struct{ v map[string]any }

func (genericScalar) ImplementsGraphQLType(name string) bool { return name == "GenericScalar" }
func (g *genericScalar) UnmarshalGraphQL(input any) error {
	m, ok := input.(map[string]any)
	if !ok {
		return fmt.Errorf("GenericScalar: want an object")
	}
	g.v = m
	return nil
}
func (g genericScalar) MarshalJSON() ([]byte, error) { return json.Marshal(g.v) }

// gqlError is a GraphQL error with the extensions clients branch on.
type gqlError struct {
	code, typ, desc string
}

func (e gqlError) Error() string { return e.desc }
func (e gqlError) Extensions() map[string]any {
	return map[string]any{"errorCode": e.code, "errorType": e.typ, "errorDescription": e.desc}
}

type tokenResolver struct {
	auth *auth.Service
	log  *slog.Logger
}

func (*tokenResolver) Ping() string { return "pong" }

type tokenInput struct {
	APIKey       *string
	RefreshToken *string
}

type tokenOutput struct{ pair auth.TokenPair }

func (o tokenOutput) Token() string           { return o.pair.Token }
func (o tokenOutput) Payload() genericScalar  { return genericScalar{o.pair.Payload} }
func (o tokenOutput) RefreshToken() string    { return o.pair.RefreshToken }
func (o tokenOutput) RefreshExpiresIn() int32 { return int32(o.pair.RefreshExpiresIn) }
func (r *tokenResolver) ObtainServiceToken(ctx context.Context, args struct{ Input tokenInput }) (*tokenOutput, error) {
	in := args.Input
	hasKey := in.APIKey != nil && *in.APIKey != ""
	hasRefresh := in.RefreshToken != nil && *in.RefreshToken != ""
	if hasKey == hasRefresh {
		return nil, gqlError{auth.CodeInvalidTokenInput, "VALIDATION", "Provide exactly one of APIKey or refreshToken."}
	}
	var pair auth.TokenPair
	var err error
	if hasKey {
		pair, err = r.auth.TokenFromKey(ctx, *in.APIKey)
	} else {
		pair, err = r.auth.TokenFromRefresh(ctx, *in.RefreshToken)
	}
	if p, ok := problem.As(err); ok && p.Kind == problem.Unauthenticated {
		return nil, gqlError{p.Code, "AUTHORIZATION", p.Detail}
	}
	if err != nil {
		r.log.ErrorContext(ctx, "obtainServiceToken failed", "request_id", requestIDFrom(ctx), "error", err.Error())
		return nil, gqlError{problem.CodeInternal, "INTERNAL", "An unexpected error occurred."}
	}
	return &tokenOutput{pair}, nil
}

func (s *Server) graphql() gin.HandlerFunc {
	schema := graphql.MustParseSchema(tokenSchema, &tokenResolver{s.auth, s.log})
	return func(c *gin.Context) {
		body, err := s.readJSON(c)
		if err != nil {
			writeError(c, err)
			return
		}
		var req struct {
			Query         string         `json:"query"`
			OperationName string         `json:"operationName"`
			Variables     map[string]any `json:"variables"`
		}
		// Malformed JSON gets the answer every REST body gets; the typed
		// decoding below only has wrong field types left to report.
		if _, perr := validate.ParseBody(body); perr != nil {
			writeError(c, perr)
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			writeError(c, problem.New(problem.Invalid, validate.CodeParseError, "The body must be a GraphQL request object: "+err.Error()))
			return
		}
		// GraphQL answers 200 even for failures; they go in errors[].
		c.JSON(http.StatusOK, schema.Exec(c.Request.Context(), req.Query, req.OperationName, req.Variables))
	}
}
