// Package status names the states the service records: an import
// process's (import_processes.status, which E10 shows) and an import
// supplier's (import_suppliers.status). They are declared here once, for
// every package and every SQL text that names them; the database's CHECK
// constraints hold the same names (TestStatus_TheDatabaseAllowsExactlyTheseNames).
package status

// The states of an import process.
const (
	// Unknown: staged, or its last processing failed (last_error says why).
	Unknown = "UNKNOWN"
	// InProgress: a task processes it now (E5).
	InProgress = "IN_PROGRESS"
	// Completed: its account exists.
	Completed = "COMPLETED"
)

// Processes are the states of an import process, in their order.
var Processes = []string{Unknown, InProgress, Completed}

// The states of an import supplier's migration.
const (
	// Ongoing: the supplier accepts accounts (E4, E5).
	Ongoing = "Ongoing"
	// Paused: it accepts none for now.
	Paused = "Paused"
	// Complete: its migration is closed.
	Complete = "Complete"
)

// Suppliers are the states of an import supplier, in their order.
var Suppliers = []string{Ongoing, Paused, Complete}
