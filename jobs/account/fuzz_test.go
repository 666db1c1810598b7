package account

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/problem"
)

// FuzzValidate: any byte string yields either an Account whose encoding
// validates again to the same Account (and AppendJSON writes that encoding
// as encoding/json does), or a *problem.Error of Kind Invalid
// whose every field problem has a code and a path. Never a panic, and never
// an infrastructure error (which would mean the payload reached the database
// in a form it refuses). Run with: go test ./jobs/account -run '^$' -fuzz FuzzValidate
func FuzzValidate(f *testing.F) {
	fix := fixture(f)
	s := string(fix)
	seeds := []string{
		s,
		s[:len(s)/2],
		strings.Replace(s, `"import_supplier": "DEMO",`, `"import_supplier": "DEMO", "import_supplier": 7,`, 1),
		strings.Replace(s, `"supply_type": "ELECTRICITY"`, `"supply_type": "GAS"`, 1),
		strings.Replace(s, `"mobile": "+44 7911 123456"`, `"mobile": "\u0000"`, 1),
		strings.Replace(s, `"volts_low": 216.2`, `"volts_low": 1e400`, 1),
		strings.Replace(s, `"id": 883421`, `"id": 1e999999`, 1),
		strings.Replace(s, `"ledgers": []`, `"ledgers": [{}]`, 1),
		strings.Replace(s, `"E-1R-VAR-C"`, `"E-1R-VAR-C\u0000"`, 1),
		strings.Replace(s, `"value": "23456.7"`, `"value": "00512.5"`, 1),
		strings.Replace(s, `"value": "23456.7"`, `"value": ".5"`, 1),
		strings.Replace(s, `"value": "23456.7"`, `"value": "-5."`, 1),
		strings.Replace(s, `"value": "23456.7"`, `"value": "-."`, 1),
		strings.Replace(s, `"KW_IMPORT"`, `"KWH_IMPORT"`, 1),
		strings.Replace(s, `"mobile": "+44 7911 123456"`, `"mobile": "+44 7911 123456 ext. 1234567890"`, 1),
		strings.Replace(s, `"mobile": "+44 7911 123456"`, `"mobile": "01614960123x123456789012345678"`, 1),
		strings.Replace(s, `"email": "Amelia.Hughes@BrightMail.co.uk"`, `"email": "\"amelia \\\" hughes\"@Müller.DE"`, 1),
		`{}`, `[]`, `null`, `{"customers": null}`, `{"import_supplier": "DEMO", "unknown_occupier": true}`,
		`{"a":1,"a":2}`, "{\"import_supplier\": \"\xff\"}",
	}
	for _, seed := range seeds {
		f.Add([]byte(seed))
	}
	b := setup(f)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := b.v.Validate(ctx, data)
		if err != nil {
			p, ok := problem.As(err)
			if !ok || p.Kind != problem.Invalid {
				t.Fatalf("error is not an Invalid problem: %v", err)
			}
			if p.Code != CodeParseError && len(p.Errors) == 0 {
				t.Fatalf("%s without field problems", p.Code)
			}
			for _, e := range p.Errors {
				if e.Code == "" || e.Attr == "" {
					t.Fatalf("field problem without code or attr: %+v", e)
				}
			}
			return
		}
		checkAppendJSON(t, a)
		enc, err := json.Marshal(a)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		again, err := b.v.Validate(ctx, enc)
		if err != nil {
			t.Fatalf("normalised payload refused: %v\n%s", err, enc)
		}
		if diff := cmp.Diff(a, again); diff != "" {
			t.Fatalf("normalisation is not idempotent (-first +second):\n%s", diff)
		}
	})
}
