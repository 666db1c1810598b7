package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/bulkimport/bulkimport/cmd/importctl/reconcile"
)

// reconcileCmd proves that a cohort arrived whole. It talks to the service
// over HTTP only, as run does.
func (c *cli) reconcileCmd() *cobra.Command {
	var cfg reconcile.Config
	var drill int
	cmd := &cobra.Command{
		Use:   "reconcile COHORT_FILE --report DIR [--failures RUN_REPORT] [--scope cohort|supplier]",
		Short: "Check, account by account, that the service holds what a cohort file imported",
		Long: `Compute each cohort line's summary (counts of customers, supply points, meters, notes, transactions,
statements and payment instructions, the transactions' sum, the ledger balance and a digest of the content)
with the service's own code, read the service's summaries of the supplier's accounts over HTTP, and compare.
For each account whose digest differs, read its detail and name the values that differ, at their paths.
The report directory receives mismatches.csv/.ndjson (account, field, expected, found), differences.csv/.ndjson
(account, path such as notes.0.body, the cohort's value, the service's), missing.csv/.ndjson (accounts the
service lacks), extra.csv/.ndjson (accounts of the supplier the cohort lacks) and summary.txt.
With --failures naming the failure report of the run (its failures.ndjson or its report directory), the
accounts the run refused are expected to be missing. --scope cohort (the default) judges the cohort's
accounts; --scope supplier judges every account of the supplier, so one the cohort lacks is a difference.
The output ends with the verdict and every report file that has rows. See docs/reconciliation.md.
Exit code: 0 everything in scope matches, 1 something differs, 2 usage or connection error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(errors.New("reconcile: give one cohort file (or - for stdin)"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Cohort = args[0]
			if cfg.APIKey == "" {
				cfg.APIKey = c.getenv("IMPORTCTL_API_KEY")
			}
			if cfg.BaseURL == "" {
				cfg.BaseURL = c.getenv("IMPORTCTL_URL")
			}
			warnInsecure(cmd.ErrOrStderr(), cfg.BaseURL)
			if drill == 0 {
				cfg.DrillDown = -1
			} else {
				cfg.DrillDown = drill
			}
			res, err := reconcile.Run(cmd.Context(), cfg)
			if err != nil {
				if errors.Is(err, reconcile.ErrUsage) {
					return usageError(err)
				}
				return &exitError{code: 2, msg: err.Error()}
			}
			res.WriteSummary(cmd.OutOrStdout())
			if code := res.ExitCode(); code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.BaseURL, "url", "", "the service's base URL (default IMPORTCTL_URL)")
	f.StringVar(&cfg.APIKey, "api-key", "", "API key (default IMPORTCTL_API_KEY; the variable keeps it out of ps)")
	f.StringVar(&cfg.ReportDir, "report", "reconciliation-report", "directory of the report files")
	f.StringVar(&cfg.Failures, "failures", "", "the run's failures.ndjson or report directory: the accounts it refused are expected to be missing")
	f.StringVar(&cfg.TempDir, "temp-dir", "", "directory of the sorted runs of a large cohort (default the system's)")
	f.IntVar(&cfg.Retries, "retries", 8, "retries of a request or a broken stream")
	f.StringVar(&cfg.Scope, "scope", reconcile.ScopeCohort, "accounts judged: cohort (the cohort's; the supplier's others are listed in extra.csv) or supplier (every account of the supplier)")
	f.IntVar(&drill, "drill-down", reconcile.DefaultDrillDown, "accounts whose digest differs that are read in full to name the values that differ (0: none)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	return cmd
}
