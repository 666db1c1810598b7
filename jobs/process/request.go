package process

import (
	"context"
	"fmt"

	v "github.com/bulkimport/bulkimport/jobs/validate"
)

// CodeInvalidRequest is the top-level code of an E5 body that breaks the
// schema; the individual problems are in the error's Errors.
const CodeInvalidRequest = "invalid_request"

// wireRequest is the E5 body as the schema binds it: dry_run stays nil when
// omitted.
type wireRequest struct {
	ExternalAccountNumber string
	ImportSupplierCode    string
	OperationsTeamName    string
	DryRun                *bool
}

// requestSchema is the E5 body (spec E5). The strings get the checks every
// string field of every endpoint gets, so that E5 refuses U+0000 and blank
// identifiers with the codes E4 uses for the same fields.
var requestSchema = v.NewObject(
	v.Req("external_account_number", v.StringValue, func(r *wireRequest) *string { return &r.ExternalAccountNumber }),
	v.Req("import_supplier_code", v.StringValue, func(r *wireRequest) *string { return &r.ImportSupplierCode }),
	v.Req("operations_team_name", v.StringValue, func(r *wireRequest) *string { return &r.OperationsTeamName }),
	v.Opt("dry_run", v.BooleanValue, func(r *wireRequest) **bool { return &r.DryRun }),
)

// ParseRequest decodes and checks the body of E5, reporting every problem
// at its own attr: a *problem.Error with code parse_error for a body that is
// not a JSON object, or invalid_request with one entry per problem. A
// request whose client hung up stops between the phases of its decoding,
// as every endpoint's does (validate.Decode).
func ParseRequest(ctx context.Context, body []byte) (Request, error) {
	var w v.Walker
	var r wireRequest
	if _, err := requestSchema.Decode(ctx, body, &w, &r); err != nil {
		return Request{}, fmt.Errorf("process: %w", err)
	}
	if err := w.Errors.Err(CodeInvalidRequest, "The request is not valid."); err != nil {
		return Request{}, err
	}
	return Request{
		ExternalAccountNumber: r.ExternalAccountNumber,
		ImportSupplierCode:    r.ImportSupplierCode,
		OperationsTeamName:    r.OperationsTeamName,
		DryRun:                r.DryRun != nil && *r.DryRun,
	}, nil
}
