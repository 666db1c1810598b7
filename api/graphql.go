package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	graphql "github.com/graph-gophers/graphql-go"
	gqlast "github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
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
		organizationSecretKey: String
		preSignedKey: String
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

// gqlError is a GraphQL error with the extensions clients branch on: code
// (the convention of GraphQL servers and clients) and, as the reference
// writes them, errorCode, errorType and errorDescription; both codes are
// the same stable code. retryAfter is set on a refusal for too many failed
// attempts; the handler sends it as the Retry-After header.
type gqlError struct {
	code, typ, desc string
	retryAfter      time.Duration
}

func (e gqlError) Error() string { return e.desc }
func (e gqlError) Extensions() map[string]any {
	return map[string]any{"code": e.code, "errorCode": e.code, "errorType": e.typ, "errorDescription": e.desc}
}

// gqlTypeOf is the errorType of a refusal the handler makes itself, by
// the kind of its problem.
var gqlTypeOf = map[problem.Kind]string{
	problem.Invalid:          "VALIDATION",
	problem.TooLarge:         "VALIDATION",
	problem.UnsupportedMedia: "VALIDATION",
	problem.MethodNotAllowed: "VALIDATION",
	problem.Unauthenticated:  "AUTHORIZATION",
	problem.TooManyRequests:  "THROTTLED",
}

type tokenResolver struct {
	auth *auth.Service
	log  *slog.Logger
}

func (*tokenResolver) Ping() string { return "pong" }

// tokenInput is the reference's ObtainJSONWebTokenInput, with the fields
// this service has credentials for. organizationSecretKey is accepted so
// that a client written against the reference gets an answer rather than a
// schema error; the service has no third-party organisations with secret
// keys, so it is always refused (codeOrganisationsNotSupported).
type tokenInput struct {
	APIKey                *string
	RefreshToken          *string
	OrganizationSecretKey *string
	PreSignedKey          *string
}

// codeOrganisationsNotSupported refuses organizationSecretKey: the service
// issues no organisation secret keys, only the API keys of spec 5.2.
const codeOrganisationsNotSupported = "organisations_not_supported"

// codePreSignedKeysNotSupported refuses preSignedKey, the reference's
// short-lived key: the service issues none.
const codePreSignedKeysNotSupported = "pre_signed_keys_not_supported"

// codeQueryInvalid is the code of an error that graph-gophers reports
// itself (a field or argument the schema lacks, a wrong type, a syntax
// error): clients branch on extensions.code, which the library leaves out.
const codeQueryInvalid = "graphql_validation_failed"

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
	hasOrg := in.OrganizationSecretKey != nil && *in.OrganizationSecretKey != ""
	hasPreSigned := in.PreSignedKey != nil && *in.PreSignedKey != ""
	switch {
	case hasPreSigned && !hasKey && !hasRefresh && !hasOrg:
		return nil, gqlError{codePreSignedKeysNotSupported, "VALIDATION",
			"This service issues no pre-signed keys, so preSignedKey cannot be used; send the API key the service operator gave you as APIKey.", 0}
	case hasPreSigned:
		return nil, gqlError{auth.CodeInvalidTokenInput, "VALIDATION", "Provide exactly one of APIKey or refreshToken.", 0}
	case hasOrg && !hasKey && !hasRefresh:
		return nil, gqlError{codeOrganisationsNotSupported, "VALIDATION",
			"This service has no organisations with secret keys, so organizationSecretKey cannot be used; send the API key the service operator gave you as APIKey.", 0}
	case hasOrg || hasKey == hasRefresh:
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
// service read and decode megabytes. A real request is well under
// 1 KiB. A lower MAX_BODY_BYTES still applies.
const graphqlMaxBodyBytes = 16 << 10

// codeTooManyOperations is the errorCode of a request with more than one
// top-level field: one request may attempt one credential, so that a client
// cannot try thousands of keys in one request and past the failure limit.
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
		// GraphQL answers 200 even for failures, in errors[] with
		// extensions.code (reference 2.2): a GraphQL client raises any
		// other status as a transport error, without reading the code.
		body, err := s.readJSONLimit(c, limit)
		if err != nil {
			s.writeGraphQLError(c, err)
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
			s.writeGraphQLError(c, perr)
			return
		}
		if err := json.Unmarshal(body, &req); err != nil {
			s.writeGraphQLError(c, problem.New(problem.Invalid, validate.CodeParseError, "The body must be a GraphQL request object: "+err.Error()))
			return
		}
		if err := checkQueryShape(req.Query); err != nil {
			s.writeGraphQLError(c, err)
			return
		}
		if topLevelFields(req.Query) > 1 {
			s.writeGraphQLError(c, problem.New(problem.Invalid, codeTooManyOperations, "A request may carry one operation with one top-level field."))
			return
		}
		var vars map[string]any
		if len(req.Variables) > 0 {
			if err := json.Unmarshal(req.Variables, &vars); err != nil {
				s.writeGraphQLError(c, problem.New(problem.Invalid, validate.CodeParseError, "The variables must be a JSON object: "+err.Error()))
				return
			}
		}
		ctx := context.WithValue(c.Request.Context(), attemptsKey{}, new(atomic.Int32))
		res := schema.Exec(ctx, req.Query, req.OperationName, vars)
		for _, e := range res.Errors {
			if e.ResolverError == nil && e.Extensions == nil {
				e.Extensions = gqlError{codeQueryInvalid, "VALIDATION", e.Message, 0}.Extensions()
				c.Set(errorCodeKey, codeQueryInvalid)
			}
			// A refusal for too many failed attempts keeps its Retry-After
			// as a header, which clients and proxies back off on.
			var g gqlError
			if errors.As(e.ResolverError, &g) {
				c.Set(errorCodeKey, g.code)
				if g.retryAfter > 0 {
					c.Header("Retry-After", strconv.Itoa(max(1, int(g.retryAfter.Seconds()))))
				}
			}
		}
		c.JSON(http.StatusOK, res)
	}
}

// writeGraphQLError answers err as GraphQL answers a failure: HTTP 200,
// "data": null and one error in errors[] with its code in extensions, and
// Retry-After as a header when the problem has one. Errors that are not
// *problem.Error, and Internal ones, are logged and shown only as a generic
// message, as writeError does.
func (s *Server) writeGraphQLError(c *gin.Context, err error) {
	p, ok := problem.As(err)
	if !ok || p.Kind == problem.Internal {
		logger(c).ErrorContext(c.Request.Context(), "internal error",
			"request_id", requestID(c), "route", c.FullPath(), "error", err.Error())
		p = problem.New(problem.Internal, problem.CodeInternal,
			"An unexpected error occurred. Quote request id "+requestID(c)+" when reporting it.")
	}
	typ, found := gqlTypeOf[p.Kind]
	if !found {
		typ = "INTERNAL"
	}
	if p.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(max(1, int(p.RetryAfter.Seconds()))))
	}
	c.Set(errorCodeKey, p.Code)
	c.Abort()
	c.JSON(http.StatusOK, gin.H{"data": nil, "errors": []map[string]any{{
		"message": p.Detail, "extensions": gqlError{p.Code, typ, p.Detail, p.RetryAfter}.Extensions(),
	}}})
}

// The bounds of a token request's query (checkQueryShape). The reference's
// request is 24 tokens and about 150 bytes; these leave ten times that for
// a client's own spelling (aliases, __typename, comments, a refresh token
// written inline).
const (
	maxQueryBytes  = 4 << 10
	maxQueryTokens = 256
)

// The codes of checkQueryShape's refusals.
const (
	codeQueryTooComplex       = "query_too_complex"
	codeFragmentsNotSupported = "fragments_not_supported"
	codeQuerySyntax           = "query_syntax_error"
)

// checkQueryShape refuses, before graph-gophers reads it, a query that the
// token endpoint cannot need: one over maxQueryBytes or maxQueryTokens, one
// that spreads a named fragment, or one that is not GraphQL's syntax. The
// endpoint takes no login, and graph-gophers' validation runs without a
// context, so it cannot be stopped once started: its check that fragments
// form no cycle grows faster than the cube of the spreads (1,000
// self-spreads of one fragment, a 5 KB body, cost 21 s of CPU; 2,500 more
// than ten minutes). One mutation with one field needs no named fragment
// (inline ones, "... on T", stay allowed: they cannot refer to themselves).
// Within these bounds the library's work on any query is a few milliseconds
// (BenchmarkGraphQL_WorstAllowedQuery).
//
// The tokens are read with gqlparser's lexer, which follows the GraphQL
// specification; graph-gophers reads some spellings the specification does
// not have (Go's "\x41" escapes), and those are refused here as syntax
// errors, so that no query reaches the library that this count misread.
func checkQueryShape(query string) error {
	if len(query) > maxQueryBytes {
		return problem.New(problem.Invalid, codeQueryTooComplex,
			fmt.Sprintf("The query is longer than %d bytes; a token request needs one mutation with one field.", maxQueryBytes))
	}
	lex := lexer.New(&gqlast.Source{Input: query})
	var prev lexer.Type
	for n := 0; ; n++ {
		tok, err := lex.ReadToken()
		if err != nil {
			return problem.New(problem.Invalid, codeQuerySyntax, "The query is not valid GraphQL: "+err.Error())
		}
		switch {
		case tok.Kind == lexer.EOF:
			return nil
		case n >= maxQueryTokens:
			return problem.New(problem.Invalid, codeQueryTooComplex,
				fmt.Sprintf("The query has more than %d tokens; a token request needs one mutation with one field.", maxQueryTokens))
		case prev == lexer.Spread && tok.Kind == lexer.Name && tok.Value != "on":
			return problem.New(problem.Invalid, codeFragmentsNotSupported,
				"Named fragments are not accepted by the token endpoint; write the fields in the mutation itself.")
		}
		prev = tok.Kind
	}
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
