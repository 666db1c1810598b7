package process

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/documents"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// A failure the worker recorded is answered by E5 as the service's (500 with
// Retry-After, through Unavailable) or as the data's (400, Invalid), with its
// own code and problems either way.
func TestRecordedError_ServiceFailuresAreUnavailableDataFailuresInvalid(t *testing.T) {
	t.Parallel()
	problems := []problem.FieldError{{Detail: "d", Code: "invalid_phone_number", Attr: "customers.0.landline"}}
	cases := []struct {
		code string
		want problem.Kind
	}{
		{problem.CodeInternal, problem.Unavailable},
		{documents.CodeStoreNotConfigured, problem.Unavailable},
		{documents.CodeStoreUnavailable, problem.Unavailable},
		{jobs.CodeAccountProcessingAbandoned, problem.Unavailable},
		{jobs.CodeAccountProcessingLost, problem.Unavailable},
		{"account_failed_validation", problem.Invalid},
		{documents.CodeNotFound, problem.Invalid},
	}
	for _, tc := range cases {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			e := recordedError(problem.Record{Detail: "detail", Code: tc.code, Errors: problems})
			type answer struct {
				Kind   problem.Kind
				Code   string
				Errors []problem.FieldError
			}
			if diff := cmp.Diff(answer{tc.want, tc.code, problems}, answer{e.Kind, e.Code, e.Errors}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
