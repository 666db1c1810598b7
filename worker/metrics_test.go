package worker

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/creation"
	"github.com/bulkimport/bulkimport/jobs/metrics"
)

// series reads the counters of m by "name{label values}".
func series(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		switch f.GetName() {
		case "importd_jobs_total", "importd_accounts_created_total":
		default:
			continue
		}
		for _, s := range f.GetMetric() {
			var vals []string
			for _, p := range s.GetLabel() {
				vals = append(vals, p.GetValue())
			}
			out[fmt.Sprintf("%s%v", f.GetName(), vals)] = s.GetCounter().GetValue()
		}
	}
	return out
}

func TestObserveJobs_CountsByTypeAndOutcome(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	run := func(typ string, payload []byte, err error, panics bool) {
		h := observeJobs(m)(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
			if panics {
				panic("boom")
			}
			return err
		}))
		defer func() { _ = recover() }() // asynq recovers panics itself
		_ = h.ProcessTask(context.Background(), asynq.NewTask(typ, payload))
	}
	run(jobs.TypeAccountProcess, []byte(`{"process_id": 1}`), nil, false)
	run(jobs.TypeAccountProcess, []byte(`{"process_id": 2, "dry_run": true}`), nil, false)
	run(jobs.TypeAccountProcess, nil, fmt.Errorf("invalid: %w", asynq.SkipRetry), false)
	run(jobs.TypeAccountProcess, nil, fmt.Errorf("create: %w", creation.ErrHandedBack), false)
	run(jobs.TypeEmailSend, nil, errors.New("smtp down"), false)
	run(jobs.TypePaymentInstructionVerify, nil, nil, true)
	run("legacy:thing", nil, nil, false)
	want := map[string]float64{
		"importd_accounts_created_total[]":                       1,
		"importd_jobs_total[success account:process]":            2,
		"importd_jobs_total[skipped account:process]":            1,
		"importd_jobs_total[handed_back account:process]":        1,
		"importd_jobs_total[failure email:send]":                 1,
		"importd_jobs_total[failure payment_instruction:verify]": 1,
		"importd_jobs_total[success unknown]":                    1,
	}
	if diff := cmp.Diff(want, series(t, m)); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
}
