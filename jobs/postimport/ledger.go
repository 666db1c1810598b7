package postimport

// LedgerSign is the sign, +1 or -1, that an amount of a transaction of type
// typ takes in the ledger balance (RULES.md, "The ledger"): E7 moves the
// balance by the signed sum of the transactions it adds, so the balance is
// the signed sum of all of them. Readers that sum transactions again use it
// to agree with E7.
func LedgerSign(typ string) int64 { return ledgerSign(typ) }
