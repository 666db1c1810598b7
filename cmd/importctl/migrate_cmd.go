package main

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
)

// exitError ends importctl with its code; msg, when set, is printed first.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError makes a refusal of the command line exit 2, as the runner's
// contract says (docs/migration-runner.md, "The report").
func usageError(err error) error { return &exitError{code: 2, msg: err.Error()} }

// runCmd is the migration runner. It talks to the service over HTTP only.
func (c *cli) runCmd() *cobra.Command {
	var cfg migrate.Config
	var progressEvery time.Duration
	cmd := &cobra.Command{
		Use:   "run COHORT_FILE --url URL --team NAME [--report DIR]",
		Short: "Migrate a cohort file through the service's API (E4, E5, E6-E9), with resume and a failure report",
		Long: `Migrate every account of COHORT_FILE (NDJSON, one account a line, gzip read as is; - for stdin)
through the service's HTTP API with an API key (--api-key or IMPORTCTL_API_KEY). Per account: stage (E4),
process (E5), then notes (E6), transactions (E7), statements (E8) and the payment instruction (E9).

The report directory receives failures.csv and failures.ndjson (one row per error item) and journal.ndjson,
the steps finished; running the same command again goes on where a stopped run ended.
Exit code: 0 every account succeeded, 1 some failed (or the run was interrupted), 2 usage or connection error.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError(errors.New("run: give one cohort file (or - for stdin)"))
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
			if cfg.ValidateOnly && cfg.DryRun {
				return usageError(errors.New("--validate-only and --dry-run exclude each other"))
			}
			errOut := cmd.ErrOrStderr()
			warnInsecure(errOut, cfg.BaseURL)
			cfg.Progress = errOut
			if f, ok := errOut.(*os.File); ok {
				cfg.Terminal = term.IsTerminal(int(f.Fd()))
			}
			cfg.ProgressEvery = progressEvery
			res, err := migrate.Run(cmd.Context(), cfg)
			res.WriteSummary(cmd.OutOrStdout())
			if err != nil {
				return &exitError{code: 2, msg: err.Error()}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "report: %s, %s\n", filepath.Join(cfg.ReportDir, migrate.FailuresCSV), filepath.Join(cfg.ReportDir, migrate.FailuresNDJSON))
			if code := res.ExitCode(); code != 0 {
				return &exitError{code: code}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.BaseURL, "url", "", "the service's base URL, e.g. https://import.example (default IMPORTCTL_URL)")
	f.StringVar(&cfg.APIKey, "api-key", "", "API key (default IMPORTCTL_API_KEY; the variable keeps it out of ps)")
	f.StringVar(&cfg.Team, "team", "", "operations team for E5 (operations_team_name)")
	f.StringVar(&cfg.ReportDir, "report", "migration-report", "directory of failures.csv, failures.ndjson and journal.ndjson")
	f.IntVar(&cfg.Concurrency, "concurrency", 16, "accounts in flight at once; with PROCESS_CONCURRENCY_LIMIT set, more than the limit only waits on 429s")
	f.BoolVar(&cfg.ValidateOnly, "validate-only", false, "run E3 over the cohort and write only the report")
	f.BoolVar(&cfg.DryRun, "dry-run", false, "stage and run E5's dry run; nothing is created")
	f.IntVar(&cfg.Retries, "retries", 8, "retries of a request after a 500, a time-out or a refused connection (429s wait without limit)")
	f.DurationVar(&cfg.RequestTimeout, "timeout", 2*time.Minute, "longest one request may take")
	f.DurationVar(&progressEvery, "progress-every", 5*time.Second, "interval of the progress line when stderr is not a terminal")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	return cmd
}

// generateCmd writes a synthetic cohort.
func (c *cli) generateCmd() *cobra.Command {
	var opts cohort.Options
	var out, expect string
	cmd := &cobra.Command{
		Use:   "generate --accounts N [--seed S] [--invalid-rate R] [--output FILE[.gz]]",
		Short: "Write a synthetic, deterministic cohort file for importctl run",
		Long: `Write N accounts as cohort lines (the same seed gives the same file), for supplier DEMO by default.
They name the demo's catalogue: tariffs ` + strings.Join(cohort.Tariffs, ", ") + `, business contract
BC-2024-0042 and payment vendor DEMO_PAY (reference DEMO-CARD-0001). With --invalid-rate R, that share of the
accounts has one problem each, of kinds the validator answers with a known code and attr; --expect FILE lists them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Accounts <= 0 {
				return usageError(errors.New("--accounts must be a positive number"))
			}
			var w io.Writer = cmd.OutOrStdout()
			var closers []io.Closer
			if out != "" && out != "-" {
				f, err := os.Create(out)
				if err != nil {
					return err
				}
				closers = append(closers, f)
				w = f
				if strings.HasSuffix(out, ".gz") {
					gz := gzip.NewWriter(f)
					closers = append([]io.Closer{gz}, closers...)
					w = gz
				}
			}
			exp, err := cohort.Generate(w, opts)
			for _, cl := range closers {
				if cerr := cl.Close(); err == nil {
					err = cerr
				}
			}
			if err != nil {
				return err
			}
			if expect != "" {
				f, err := os.Create(expect)
				if err != nil {
					return err
				}
				enc := json.NewEncoder(f)
				for _, e := range exp {
					enc.Encode(e)
				}
				if err := f.Close(); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&opts.Accounts, "accounts", 0, "number of accounts")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the random choices; it is also in every external account number")
	f.Float64Var(&opts.InvalidRate, "invalid-rate", 0, "share of invalid accounts, 0 to 1")
	f.StringVar(&opts.Supplier, "supplier", "DEMO", "import supplier of every account")
	f.StringVar(&opts.BusinessContract, "business-contract", "BC-2024-0042", "contract that business accounts (one in ten) name")
	f.BoolVar(&opts.NoBusiness, "no-business", false, "make no business accounts")
	f.StringVar(&opts.Vendor, "vendor", "DEMO_PAY", "payment vendor of the payment instructions (one account in four)")
	f.StringVar(&opts.Reference, "reference", "DEMO-CARD-0001", "the vendor's reference of a CARD instruction")
	f.BoolVar(&opts.NoPayments, "no-payments", false, "give no account a payment instruction")
	f.StringVarP(&out, "output", "o", "", "file to write (gzip when it ends in .gz); default stdout")
	f.StringVar(&expect, "expect", "", "also write the invalid accounts, with the code and attr expected of each, to this NDJSON file")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	return cmd
}
