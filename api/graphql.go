package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	graphql "github.com/graph-gophers/graphql-go"
	gqlast "github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

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
// retryAfter is set on a refusal for too many failed attempts, which the
// handler answers as a 429 (throttled).
type gqlError struct {
	code, typ, desc string
	retryAfter      time.Duration
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
	// The count that topLevelFields makes before execution reads the query
	// with gqlparser, which refuses some queries that graph-gophers runs
	// (a "\x41" escape in a string): such a query counted no field, and its
	// many aliases each tried a credential. The count here is of what runs.
	if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok && n.Add(1) > 1 {
		return nil, errTooManyOperations
	}
	in := args.Input
	hasKey := in.APIKey != nil && *in.APIKey != ""
	hasRefresh := in.RefreshToken != nil && *in.RefreshToken != ""
	if hasKey == hasRefresh {
		return nil, gqlError{auth.CodeInvalidTokenInput, "VALIDATION", "Provide exactly one of APIKey or refreshToken.", 0}
	}
	var pair auth.TokenPair
	var err error
	if hasKey {
		pair, err = r.auth.TokenFromKey(ctx, *in.APIKey)
	} else {
		pair, err = r.auth.TokenFromRefresh(ctx, *in.RefreshToken)
	}
	if p, ok := problem.As(err); ok && p.Kind == problem.Unauthenticated {
		return nil, gqlError{p.Code, "AUTHORIZATION", p.Detail, 0}
	}
	if p, ok := problem.As(err); ok && p.Kind == problem.TooManyRequests {
		return nil, gqlError{p.Code, "THROTTLED", p.Detail, p.RetryAfter}
	}
	if err != nil {
		r.log.ErrorContext(ctx, "obtainServiceToken failed", "request_id", requestIDFrom(ctx), "error", err.Error())
		return nil, gqlError{problem.CodeInternal, "INTERNAL", "An unexpected error occurred.", 0}
	}
	return &tokenOutput{pair}, nil
}

// graphqlMaxBodyBytes bounds a token request. The endpoint takes no token,
// so anyone can reach it: a small limit keeps one client from making the
// service read and decode megabytes (issue 20). A real request is well under
// 1 KiB. A lower MAX_BODY_BYTES still applies.
const graphqlMaxBodyBytes = 16 << 10

// codeTooManyOperations is the errorCode of a request with more than one
// top-level field: one request may attempt one credential (issue 20).
const codeTooManyOperations = "too_many_operations"

var errTooManyOperations = gqlError{codeTooManyOperations, "VALIDATION", "A request may carry one operation with one top-level field.", 0}

// attemptsKey keys the count of obtainServiceToken calls of one request in
// its context.
type attemptsKey struct{}

func (s *Server) graphql() gin.HandlerFunc {
	schema := graphql.MustParseSchema(tokenSchema, &tokenResolver{s.auth, s.log})
	limit := int64(graphqlMaxBodyBytes)
	if s.cfg.MaxBodyBytes > 0 {
		limit = min(limit, s.cfg.MaxBodyBytes)
	}
	return func(c *gin.Context) {
		body, err := s.readJSONLimit(c, limit)
		if err != nil {
			writeError(c, err)
			return
		}
		var req struct {
			Query         string          `json:"query"`
			OperationName string          `json:"operationName"`
			Variables     json.RawMessage `json:"variables"`
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
		if topLevelFields(req.Query) > 1 {
			c.JSON(http.StatusOK, gin.H{"data": nil, "errors": []map[string]any{{
				"message":    errTooManyOperations.desc,
				"extensions": errTooManyOperations.Extensions(),
			}}})
			return
		}
		var vars map[string]any
		if len(req.Variables) > 0 {
			if err := json.Unmarshal(req.Variables, &vars); err != nil {
				writeError(c, problem.New(problem.Invalid, "parse_error", "The variables must be a JSON object: "+err.Error()))
				return
			}
		}
		ctx := context.WithValue(c.Request.Context(), attemptsKey{}, new(atomic.Int32))
		res := schema.Exec(ctx, req.Query, req.OperationName, vars)
		if p := throttled(res); p != nil {
			writeError(c, p)
			return
		}
		c.JSON(http.StatusOK, res)
	}
}

// throttled returns the 429 to answer when the request was refused for too
// many failed attempts, or nil. Unlike the other refusals, which GraphQL
// answers with 200 and errors[], this one is the HTTP 429 with Retry-After
// (section 7) that clients and proxies already back off on.
func throttled(res *graphql.Response) *problem.Error {
	for _, e := range res.Errors {
		var g gqlError
		if errors.As(e.ResolverError, &g) && g.code == auth.CodeTooManyFailedAttempts {
			p := problem.New(problem.TooManyRequests, g.code, g.desc)
			p.RetryAfter = g.retryAfter
			return p
		}
	}
	return nil
}

// topLevelFields counts the top-level fields of all operations in query,
// following fragments, and stops counting at 2. A query that does not parse
// counts 0 so that graphql-go reports its syntax error; gqlparser refuses
// some queries that graphql-go accepts, so the resolver counts its calls
// too (ObtainServiceToken).
func topLevelFields(query string) int {
	doc, err := parser.ParseQuery(&gqlast.Source{Input: query})
	if err != nil {
		return 0
	}
	n := 0
	seen := map[string]bool{}
	var count func(gqlast.SelectionSet)
	count = func(set gqlast.SelectionSet) {
		for _, sel := range set {
			if n > 1 {
				return
			}
			switch sel := sel.(type) {
			case *gqlast.Field:
				n++
			case *gqlast.InlineFragment:
				count(sel.SelectionSet)
			case *gqlast.FragmentSpread:
				// A fragment spread twice selects the same fields twice.
				if f := doc.Fragments.ForName(sel.Name); f != nil && !seen[sel.Name] {
					seen[sel.Name] = true
					count(f.SelectionSet)
				}
			}
		}
	}
	for _, op := range doc.Operations {
		count(op.SelectionSet)
	}
	return n
}
