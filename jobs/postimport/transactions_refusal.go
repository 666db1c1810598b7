package postimport

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/bulkimport/bulkimport/jobs/problem"
	v "github.com/bulkimport/bulkimport/jobs/validate"
)

const detailTransactionsFailed = "Could not import the transactions; none was added."

// TransactionsFailure is E7's refusal: the section 7 fields (code
// transactions_failed_validation, every problem in errors) plus the spec's
// status TRANSACTION_IMPORT_ERROR, error_detail (the first problem of the
// first failing transaction) and transaction_data (that transaction as
// sent, or null when no transaction is at fault). raw holds the
// transactions as sent.
func TransactionsFailure(errs problem.List, raw []json.RawMessage) *problem.Error {
	e := errs.Err(CodeTransactionsFailed, detailTransactionsFailed)
	first, detail := -1, errs[0].Detail
	for _, fe := range errs {
		if i, ok := transactionIndex(fe.Attr); ok && (first < 0 || i < first) {
			first, detail = i, fe.Detail
		}
	}
	var data any
	if first >= 0 && first < len(raw) {
		data = echoTransaction(raw[first])
	}
	return e.With("status", TransactionImportError).With("error_detail", detail).With("transaction_data", data)
}

// echoTransaction returns a transaction as sent, with each money field
// that is a valid amount written as it is answered on success: amount as a
// string with two places, as the spec's 400 example shows it ("amount":
// "71.00"), and line_items[].net_amount, tax_items[].amount and value_taxed
// as exact strings (Money.String). Everything else, and a money field that
// is not a valid amount, stays exactly as sent.
func echoTransaction(raw json.RawMessage) json.RawMessage {
	val, err := v.Parse(raw)
	if err != nil || val.Kind != v.KindObject {
		return raw
	}
	var b strings.Builder
	writeEcho(&b, val, map[string]map[string]bool{"": {"amount": true},
		"line_items": {"net_amount": true}, "tax_items": {"amount": true, "value_taxed": true}}, "")
	return json.RawMessage(b.String())
}

// writeEcho writes the object val with the money fields of its level (the
// key of money) as strings, and recurses into the item lists named there.
func writeEcho(b *strings.Builder, val *v.Value, money map[string]map[string]bool, level string) {
	b.WriteByte('{')
	for i := range val.Members {
		m := &val.Members[i]
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.Key)
		b.Write(k)
		b.WriteByte(':')
		_, isList := money[m.Key]
		switch {
		case money[level][m.Key]:
			if mv, ok := parseMoney(&v.Walker{}, &m.Value); ok && level == "" {
				b.WriteString(`"` + Amount{mv}.Answer() + `"`)
			} else if ok {
				b.WriteString(`"` + mv.String() + `"`)
			} else {
				b.WriteString(m.Value.Raw)
			}
		case level == "" && isList && m.Key != "" && m.Value.Kind == v.KindArray:
			b.WriteByte('[')
			for j := range m.Value.Items {
				if j > 0 {
					b.WriteByte(',')
				}
				if it := &m.Value.Items[j]; it.Kind == v.KindObject {
					writeEcho(b, it, money, m.Key)
				} else {
					b.WriteString(it.Raw)
				}
			}
			b.WriteByte(']')
		default:
			b.WriteString(m.Value.Raw)
		}
	}
	b.WriteByte('}')
}

// transactionsParseFailure gives a body that is not a JSON object E7's form.
func transactionsParseFailure(p *problem.Error) *problem.Error {
	return p.With("status", TransactionImportError).With("error_detail", p.Detail).With("transaction_data", nil)
}

// transactionIndex returns N of an attr "transactions.N...".
func transactionIndex(attr string) (int, bool) {
	rest, ok := strings.CutPrefix(attr, "transactions.")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	return i, err == nil
}
