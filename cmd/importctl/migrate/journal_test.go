package migrate

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A journal whose last line was torn by a kill during its write is read
// without that line, and the next entry starts on a line of its own.
func TestJournal_TornLastLineIsIgnored(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), JournalFile)
	whole := `{"at":"2026-01-01T00:00:00Z","line":1,"account":"DEMO/A-1","step":"E4 stage"}` + "\n"
	torn := `{"at":"2026-01-01T00:00:00Z","line":1,"account":"DEMO/A-1","st`
	if err := os.WriteFile(path, []byte(whole+torn), 0o644); err != nil {
		t.Fatal(err)
	}
	j, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if !j.finished("DEMO/A-1", StepStage) || j.finished("DEMO/A-1", StepProcess) {
		t.Errorf("read %v, want E4 of DEMO/A-1 only", j.done)
	}
	j.record(journalEntry{Line: 1, Account: "DEMO/A-1", Step: StepProcess})
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	j, err = openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	want := map[string]map[Step]bool{"DEMO/A-1": {StepStage: true, StepProcess: true}}
	if d := cmp.Diff(want, j.done); d != "" {
		t.Errorf("journal after the torn line (-want +got):\n%s", d)
	}
}

// The answers that mean a step was done before count as success.
func TestSucceeded_CountsTheServicesAnswersToARepeat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		step   Step
		dry    bool
		status int
		body   string
		want   bool
	}{
		{"E5 created", StepProcess, false, 201, `{"service_account_number":"A-00000001"}`, true},
		{"E5 already imported with the number", StepProcess, false, 400, `{"code":"account_import_process_already_imported","service_account_number":"A-00000001"}`, true},
		{"E5 already imported without a number", StepProcess, false, 400, `{"code":"account_import_process_already_imported"}`, false},
		{"E5 dry run rolled back", StepProcess, true, 400, `{"code":"dry_run_rolled_back"}`, true},
		{"E5 dry run rolled back outside a dry run", StepProcess, false, 400, `{"code":"dry_run_rolled_back"}`, false},
		{"E5 invalid", StepProcess, false, 400, `{"code":"account_failed_validation","errors":[{"code":"invalid","attr":"x"}]}`, false},
		{"E4 already imported", StepStage, false, 400, `{"code":"account_import_process_already_imported","service_account_number":"A-00000001"}`, true},
		{"E4 while an earlier E5 runs", StepStage, false, 400, `{"code":"account_import_in_progress"}`, true},
		{"E4 skipped", StepStage, false, 400, `{"code":"account_marked_to_be_skipped"}`, false},
		{"E8 stored before", StepStatements, false, 400, `{"code":"historical_statements_failed_validation","errors":[{"code":"historical_statement_already_exists","attr":"statements.0.statement_id"}]}`, true},
		{"E8 stored before and invalid", StepStatements, false, 400, `{"code":"historical_statements_failed_validation","errors":[{"code":"historical_statement_already_exists"},{"code":"invalid_date"}]}`, false},
		{"E9 stored before", StepPaymentInstruction, false, 400, `{"code":"payment_instruction_already_exists"}`, true},
		{"E6 not found", StepNotes, false, 404, `{"code":"account_not_found"}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := succeeded(c.step, c.dry, answer{Status: c.status, Body: []byte(c.body)}); got != c.want {
				t.Errorf("succeeded = %v, want %v", got, c.want)
			}
		})
	}
}
