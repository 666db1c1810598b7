package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shopspring/decimal"
	"github.com/spf13/cobra"

	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/accountview"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// accountShowCmd prints an account as the service holds it, for an
// operator or a migration team to check against the source system. It reads
// through the service's API with an API key, as run and reconcile do, or
// straight from the database (DATABASE_URL) for an operator; showSource
// says which.
func (c *cli) accountShowCmd() *cobra.Command {
	var apiURL, apiKey string
	var fromDB bool
	cmd := &cobra.Command{Use: "show SUPPLIER EXTERNAL_ACCOUNT_NUMBER",
		Short: "Print an account as imported: its process, customers, supply points, notes, money and payment instructions",
		Long: "Print an account as imported: its import process (status, times, last error), the account with its\n" +
			"customers, supply addresses, supply points, meters, metadata and notes, its transactions, historical\n" +
			"statements, payment instructions and ledger balance. The balance is what the customer owes (positive:\n" +
			"in debit): the sum of the transactions, charges, supply charges and repayments added, credits and\n" +
			"payments taken away, as E7 keeps it. An account staged but not yet created shows its process alone.\n" +
			"--json prints one document with the same content (docs/operating.md, \"Reading an account back\").\n\n" +
			"It reads through the service's API when an API key is set (--api-key or IMPORTCTL_API_KEY, with\n" +
			"--url or IMPORTCTL_URL), seeing the suppliers the key sees; otherwise, or with --database, it reads\n" +
			"the database (DATABASE_URL), as an operator does. Both print the same document.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if apiKey == "" {
				apiKey = c.getenv("IMPORTCTL_API_KEY")
			}
			if apiURL == "" {
				apiURL = c.getenv("IMPORTCTL_URL")
			}
			ctx := cmd.Context()
			var v *accountview.View
			var err error
			switch showSource(fromDB, apiKey, c.getenv("DATABASE_URL")) {
			case sourceAPI:
				if apiURL == "" {
					return fmt.Errorf("IMPORTCTL_URL: required with an API key (or give --url; --database reads DATABASE_URL instead)")
				}
				warnInsecure(cmd.ErrOrStderr(), apiURL)
				v, err = fetchAccountView(ctx, apiURL, apiKey, args[0], args[1])
			case sourceDB:
				var d *db.DB
				if d, err = c.open(ctx); err == nil {
					v, err = accountview.Load(ctx, d, args[0], args[1])
				}
			default:
				return errors.New("account show reads through the API with IMPORTCTL_URL and IMPORTCTL_API_KEY (eval \"$(make -s env)\" sets both locally), or the database with DATABASE_URL; neither is set")
			}
			if err != nil {
				return err
			}
			if c.asJSON {
				enc := json.NewEncoder(c.out)
				enc.SetIndent("", "  ")
				enc.SetEscapeHTML(false) // a note's "<" and "&" as written, not \u003c and \u0026
				return enc.Encode(v)
			}
			return writeAccountView(c.out, v)
		}}
	f := cmd.Flags()
	f.StringVar(&apiURL, "url", "", "the service's base URL (default IMPORTCTL_URL)")
	f.StringVar(&apiKey, "api-key", "", "API key (default IMPORTCTL_API_KEY; the variable keeps it out of ps)")
	f.BoolVar(&fromDB, "database", false, "read the database (DATABASE_URL) even when an API key is set")
	return cmd
}

// The sources account show reads from.
const (
	sourceNone = iota
	sourceAPI
	sourceDB
)

// showSource picks where account show reads. An API key wins over
// DATABASE_URL: a migration team's shell often holds both (make -s env sets
// both locally), and the key's view is the one the team is entitled to and
// the one the service answers; --database is the operator's way to read the
// database all the same (the service down, or a supplier the key does not
// see).
func showSource(fromDB bool, apiKey, databaseURL string) int {
	switch {
	case fromDB:
		return sourceDB
	case apiKey != "":
		return sourceAPI
	case databaseURL != "":
		return sourceDB
	}
	return sourceNone
}

// fetchAccountView reads the account through the API with an access token
// of key, as the runner sends its requests (migrate.Tokens.Get: token
// renewal, retries). A refusal is returned as the service's problem, its
// code and detail, as the database's reading returns its own.
func fetchAccountView(ctx context.Context, base, key, supplier, number string) (*accountview.View, error) {
	tokens, err := migrate.NewTokens(migrate.Config{BaseURL: base, APIKey: key, Retries: 3})
	if err != nil {
		return nil, err
	}
	status, body, err := tokens.Get(ctx, migrate.AccountPath(supplier, number))
	if err != nil {
		return nil, fmt.Errorf("cannot reach the service: %w", err)
	}
	if status == http.StatusOK {
		v := new(accountview.View)
		if err := json.Unmarshal(body, v); err != nil {
			return nil, fmt.Errorf("account show: the service's answer is not an account: %w", err)
		}
		return v, nil
	}
	var p struct{ Detail, Code string }
	if json.Unmarshal(body, &p) != nil || p.Detail == "" {
		return nil, fmt.Errorf("account show: the service answered %d", status)
	}
	kind := problem.Invalid
	if status == http.StatusNotFound {
		kind = problem.NotFound
	}
	return nil, problem.New(kind, p.Code, p.Detail)
}

// writeAccountView writes v as sections of aligned columns, each under a
// heading. Values are on one line each: line breaks and tabs in them are
// written as \n and \t.
func writeAccountView(w io.Writer, v *accountview.View) error {
	p := &printer{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	p.process(v)
	if v.Account == nil {
		p.heading("ACCOUNT")
		p.line("The account does not exist yet: its import process is " + v.Process.Status + "; E5 creates it.")
		return p.flush()
	}
	a := v.Account
	p.account(a)
	p.customers(a.Customers)
	p.supplyAddresses(a.SupplyAddresses)
	p.metadata(a.Metadata)
	p.notes(a.Notes)
	p.transactions(a.Transactions)
	p.statements(a.Statements)
	p.payments(a.PaymentInstructions)
	p.ledger(a.Ledger)
	return p.flush()
}

// printer writes through one tabwriter; each section's columns align among
// themselves (a blank line ends a tabwriter block).
type printer struct {
	tw       *tabwriter.Writer
	sections int
	err      error
	fieldErr error
}

func (p *printer) row(cells ...string) {
	for i, c := range cells {
		cells[i] = oneCell(c)
	}
	if _, err := fmt.Fprintln(p.tw, strings.Join(cells, "\t")); err != nil && p.err == nil {
		p.err = err
	}
}

// line writes text that takes no part in the columns.
func (p *printer) line(text string) { p.row(text) }

func (p *printer) heading(title string) {
	if p.sections > 0 {
		p.row("")
	}
	p.sections++
	p.row(title)
}

func (p *printer) flush() error {
	if err := p.tw.Flush(); err != nil && p.err == nil {
		p.err = err
	}
	if p.err == nil {
		p.err = p.fieldErr
	}
	return p.err
}

// oneCell keeps a value on its line and out of the column separators.
var oneCell = strings.NewReplacer("\r", `\r`, "\n", `\n`, "\t", `\t`).Replace

func (p *printer) process(v *accountview.View) {
	pr := v.Process
	p.heading("IMPORT PROCESS")
	p.row("Supplier", v.ImportSupplier)
	p.row("External account number", v.ExternalAccountNumber)
	p.row("Status", pr.Status)
	p.row("Service account number", str(pr.ServiceAccountNumber))
	p.row("Staged", stamp(pr.StagedAt))
	p.row("Updated", stamp(pr.UpdatedAt))
	p.row("Account created", stampPtr(pr.AccountCreatedAt))
	p.row("Marked to be skipped", yesNo(pr.Skipped))
	var le problem.Record
	if len(pr.LastError) == 0 || string(pr.LastError) == "null" {
		p.row("Last error", "-")
		return
	}
	if err := json.Unmarshal(pr.LastError, &le); err != nil {
		p.row("Last error", string(pr.LastError))
		return
	}
	p.row("Last error", le.Code+": "+le.Detail)
	for _, e := range le.Errors {
		p.row("", e.Attr+": "+e.Code+": "+e.Detail)
	}
}

func (p *printer) account(a *accountview.Account) {
	p.heading("ACCOUNT")
	p.row("Service account number", a.ServiceAccountNumber)
	p.row("Created", stamp(a.CreatedAt))
	p.row("Operations team", a.OperationsTeam)
	p.row("Unknown occupier", yesNo(a.UnknownOccupier))
	b := a.BillingAddress
	p.row("Billing address", join(str(b.StreetAddress), str(b.Locality), str(b.AdministrativeArea), str(b.PostalCode), b.Country))
	p.row("Last billed to", str(a.LastBilledToDate))
	if a.Business == nil {
		p.row("Business", "-")
		return
	}
	bu := a.Business
	p.row("Business", fmt.Sprintf("%s: %s (%s, company number %s)", bu.ExternalBusinessIdentifier, bu.CompanyName, bu.BusinessType, bu.CompanyNumber))
	p.row("Business contract", fmt.Sprintf("%s (valid from %s, signed %s)", bu.ContractIdentifier, str(bu.ContractValidFromDate), str(bu.ContractSignedAtDate)))
}

func (p *printer) customers(cs []accountview.Customer) {
	p.heading(fmt.Sprintf("CUSTOMERS (%d)", len(cs)))
	if len(cs) == 0 {
		p.line("(none)")
		return
	}
	p.row("#", "NAME", "EMAIL", "MOBILE", "LANDLINE", "OTHER PHONES", "BORN", "UPDATES", "OFFERS", "SMS", "USER DETAILS")
	for i, c := range cs {
		var details []string
		for _, d := range c.UserDetails {
			details = append(details, d.Namespace+"="+d.Value)
		}
		p.row(strconv.Itoa(i+1), name(c), str(c.Email), str(c.Mobile), str(c.Landline),
			list(c.AlternativePhoneNumbers), str(c.DateOfBirth), boolPtr(c.OptedIntoUpdates), boolPtr(c.OptedIntoOffers),
			boolPtr(c.OptedIntoSMS), list(details))
	}
}

func (p *printer) supplyAddresses(sas []accountview.SupplyAddress) {
	p.heading(fmt.Sprintf("SUPPLY ADDRESSES (%d)", len(sas)))
	if len(sas) == 0 {
		p.line("(none)")
		return
	}
	for i, sa := range sas {
		p.row(fmt.Sprintf("Address %d", i+1), join(sa.SupplyAddress1, str(sa.SupplyAddress2), str(sa.SupplyAddress3),
			str(sa.SupplyAddress4), sa.SupplyPostcode))
		p.row("  customer since", sa.CustomerAtSupplyAddressFromDate)
		for j, sp := range sa.SupplyPoints {
			p.row(fmt.Sprintf("  Supply point %d.%d", i+1, j+1), sp.SupplyType)
			p.row("    supply start", sp.SupplyStartDate)
			p.row("    last billed to", str(sp.LastBilledToDate))
			p.fields("    ", sp.Fields)
			for _, m := range sp.Meters {
				p.row("    Meter "+str(m.SerialNumber), fmt.Sprintf("status %s, active from %s, subgroup %s, meter number %s, sealed %s",
					str(m.Status), str(m.ActiveFrom), intPtr(m.Subgroup), intPtr(m.MeterNumber), str(m.SealDate)))
				p.fields("      ", m.MeterType)
				for _, r := range m.Registers {
					mult := "-"
					if r.Multiplier != nil {
						mult = r.Multiplier.String()
					}
					p.row("      register "+r.RegisterType, fmt.Sprintf("digits %s.%s, active from %s, multiplier %s",
						intPtr(r.WholeDigits), intPtr(r.DecimalDigits), str(r.ActiveFrom), mult))
				}
			}
			for _, g := range sp.Agreements {
				p.row("    agreement", fmt.Sprintf("from %s: tariff %s (product %s)", g.EffectiveFrom, g.TariffCode, g.ProductCode))
			}
			for _, r := range sp.TransferReadings {
				p.row("    transfer reading", fmt.Sprintf("%s on %s: %s", r.RegisterType, r.ReadDate, r.Value))
			}
		}
	}
}

// fields writes each member of f on a row of its own, its value as JSON
// text without the quotes of a string.
func (p *printer) fields(indent string, f accountview.Fields) {
	list, err := f.List()
	if err != nil {
		p.fieldErr = err
		return
	}
	for _, fl := range list {
		val := spacedJSON(fl.Value)
		var s string
		if strings.HasPrefix(val, `"`) && json.Unmarshal(fl.Value, &s) == nil {
			val = s
		}
		p.row(indent+fl.Name, val)
	}
}

func (p *printer) metadata(md []accountview.Metadata) {
	p.heading(fmt.Sprintf("METADATA (%d)", len(md)))
	if len(md) == 0 {
		p.line("(none)")
		return
	}
	p.row("KEY", "VALUE")
	for _, m := range md {
		p.row(m.Key, spacedJSON(m.Value))
	}
}

func (p *printer) notes(ns []accountview.Note) {
	p.heading(fmt.Sprintf("NOTES (%d)", len(ns)))
	if len(ns) == 0 {
		p.line("(none)")
		return
	}
	p.row("CREATED", "PINNED", "UNPIN AT", "BODY", "DOCUMENTS")
	for _, n := range ns {
		body := n.Body
		if body == "" {
			body = "-"
		}
		p.row(stamp(n.CreatedAt), yesNo(n.IsPinned), stampPtr(n.UnpinAt), body, list(n.DocumentPaths))
	}
}

func (p *printer) transactions(ts []accountview.Transaction) {
	p.heading(fmt.Sprintf("TRANSACTIONS (%d)", len(ts)))
	if len(ts) == 0 {
		p.line("(none)")
		return
	}
	p.row("DATE", "ID", "TYPE", "AMOUNT", "LEDGER", "REASON", "PAYMENT TYPE", "REFERENCE", "PRODUCT", "MOVED FROM", "DESCRIPTION",
		"DISPLAY NOTE", "NOTE", "TO PREPAY METER")
	var lines, taxes [][]string
	for _, t := range ts {
		signed := t.Amount.Mul(decimal.NewFromInt(postimport.LedgerSign(t.Type)))
		p.row(t.TransactionDate, t.TransactionID, t.Type, t.Amount.String(), signedMoney(signed), str(t.Reason), str(t.PaymentType),
			str(t.Reference), str(t.ProductCode), str(t.OriginalTransactionDate), str(t.Description), str(t.DisplayNote), str(t.Note),
			str(t.ToPrepayMeterSerialNumber))
		for _, l := range t.LineItems {
			units := make([]string, len(l.Units))
			for i, u := range l.Units {
				units[i] = u.String()
			}
			lines = append(lines, []string{t.TransactionID, l.RateBand, l.StartDate, l.EndDate, l.NumberOfUnits.String(),
				l.PricePerUnit.String(), l.NetAmount.String(), list(units)})
		}
		for _, x := range t.TaxItems {
			taxes = append(taxes, []string{t.TransactionID, x.TaxType, x.ValueTaxed.String(), x.Rate.String(), str(x.UnitType), x.Amount.String()})
		}
	}
	if len(lines) > 0 {
		p.heading("TRANSACTION LINE ITEMS")
		p.row("TRANSACTION", "RATE BAND", "FROM", "TO", "UNITS", "PRICE PER UNIT", "NET AMOUNT", "UNIT SPLIT")
		for _, l := range lines {
			p.row(l...)
		}
	}
	if len(taxes) > 0 {
		p.heading("TRANSACTION TAX ITEMS")
		p.row("TRANSACTION", "TAX TYPE", "VALUE TAXED", "RATE", "UNIT TYPE", "AMOUNT")
		for _, x := range taxes {
			p.row(x...)
		}
	}
}

func (p *printer) statements(ss []accountview.Statement) {
	p.heading(fmt.Sprintf("HISTORICAL STATEMENTS (%d)", len(ss)))
	if len(ss) == 0 {
		p.line("(none)")
		return
	}
	p.row("STATEMENT ID", "NUMBER", "FROM", "TO", "ISSUED", "GROSS AMOUNT (MINOR UNITS)", "PATH")
	for _, s := range ss {
		p.row(s.StatementID, str(s.Number), s.BillPeriodFromDate, s.BillPeriodToDate, str(s.IssuedDate), intPtr(s.GrossAmount), str(s.StatementPath))
	}
}

func (p *printer) payments(ps []accountview.Payment) {
	p.heading(fmt.Sprintf("PAYMENT INSTRUCTIONS (%d)", len(ps)))
	if len(ps) == 0 {
		p.line("(none)")
		return
	}
	p.row("FOR", "VENDOR", "REFERENCE", "TYPE", "VENDOR STATUS", "VERIFIED", "VENDOR DETAILS")
	for _, pi := range ps {
		owner := pi.For
		if pi.ExternalBusinessIdentifier != nil {
			owner += " " + *pi.ExternalBusinessIdentifier
		}
		p.row(owner, pi.Vendor, pi.Reference, pi.Type, pi.VendorStatus, stamp(pi.VerifiedAt), spacedJSON(pi.VendorDetails))
	}
}

func (p *printer) ledger(l accountview.Ledger) {
	p.heading("LEDGER")
	p.row("Currency", l.Currency)
	p.row("Balance", l.Balance.String()+" (what the customer owes; negative: in credit)")
	p.row("Sum of the transactions", l.FromTransactions.String())
	if l.LastStatementClosingDate != nil {
		p.row("Last statement closed", *l.LastStatementClosingDate)
	}
	if l.LastStatementIssueDate != nil {
		p.row("Last statement issued", *l.LastStatementIssueDate)
	}
	if l.LastStatementBalance != nil {
		p.row("Last statement balance", l.LastStatementBalance.String()+" (as sent: credit positive)")
	}
	if !l.Consistent() {
		p.line("WARNING: the stored balance is not the sum of the transactions; the ledger was changed outside E7.")
	}
}

// signedMoney writes d exactly, as accountview.Money does, with its sign.
func signedMoney(d decimal.Decimal) string {
	s := accountview.Money{Decimal: d}.String()
	if d.IsNegative() {
		return s
	}
	return "+" + s
}

// spacedJSON writes a JSON value in one form whatever its source: a space
// after each ":" and "," outside strings, none elsewhere, as PostgreSQL
// writes jsonb. The API's encoder writes the same value without the spaces;
// the table reads the same either way.
func spacedJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	out := make([]byte, 0, b.Len()+b.Len()/4)
	inString, escaped := false, false
	for _, c := range b.Bytes() {
		out = append(out, c)
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ':' || c == ','):
			out = append(out, ' ')
		}
	}
	return string(out)
}

func str(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func intPtr(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

func boolPtr(b *bool) string {
	if b == nil {
		return "-"
	}
	return yesNo(*b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// stamp writes a time in UTC to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func stampPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

// join joins the parts that are set with ", ".
func join(parts ...string) string {
	var out []string
	for _, s := range parts {
		// A street address often holds several lines; each reads as one
		// more part of the address, not as an escaped line break.
		for _, l := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if l = strings.TrimSpace(l); l != "" && l != "-" {
				out = append(out, l)
			}
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, ", ")
}

// name is a customer's given and family name, "-" when neither is set.
func name(c accountview.Customer) string {
	var parts []string
	for _, s := range []*string{c.GivenName, c.FamilyName} {
		if s != nil && *s != "" {
			parts = append(parts, *s)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func list(items []string) string {
	if len(items) == 0 {
		return "-"
	}
	return strings.Join(items, ", ")
}
