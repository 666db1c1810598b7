package creation

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"text/template"
	"time"
	"unicode"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// options are the facts account creation needs beyond the payload.
type options struct {
	ProcessID        int64
	OperationsTeamID int64
	Now              time.Time
}

// created describes a new account.
type created struct {
	AccountID            int64
	ServiceAccountNumber string
	CreatedAt            time.Time
	// Outbox lists the e-mail outbox rows to send once the transaction commits.
	Outbox []int64
}

// toCreate is one account of createAccounts.
type toCreate struct {
	acc *account.Account
	opt options
}

func createdAt(opt options) time.Time { return opt.Now.UTC().Truncate(time.Microsecond) }

// createAccounts writes the accounts of in inside tx, each with everything
// in it (its ledger, customers, addresses, supply points with their
// type-specific rows, meters, registers, agreements, transfer readings,
// metadata, notes and, when the supplier wants them, migration e-mails in
// the outbox), records each one's process as COMPLETED with its new number,
// and answers each one's created or refusal in errs. The caller commits or
// rolls back. err is a failure of the statement, after which tx must be
// rolled back.
//
// A lone account runs createSQL; several run createManySQL, one execution
// for all of them. Either is one statement whatever the size of the
// accounts: one INSERT per table inside a single WITH, fed from jsonb
// documents. A statement per row cost a round trip, and two process
// wake-ups, each.
//
// Service account numbers are random (draw), so a clash is possible but
// rare; ON CONFLICT on the number alone writes nothing for that account and
// lets us draw again, for the accounts that clashed only, without aborting
// the transaction. Numbers drawn for one execution differ from each other.
// A clash on (supplier, external account number) is not caught: it means
// the account exists, and the error must surface.
//
// A refusal for a missing business contract wrote nothing for its account
// (refusedBeforeWriting); a refusal for a missing tariff did, and the
// caller must roll back.
func createAccounts(ctx context.Context, tx *db.Tx, in []toCreate, draw func() string) (cs []created, errs []error, err error) {
	cs, errs = make([]created, len(in)), make([]error, len(in))
	pending := make([]int, len(in))
	for i := range in {
		pending[i] = i
		cs[i].CreatedAt = createdAt(in[i].opt)
	}
	for attempt := 0; attempt < 5 && len(pending) > 0; attempt++ {
		numbers, docs := make([]string, len(pending)), make([][]byte, len(pending))
		drawn := make(map[string]bool, len(pending))
		for k, i := range pending {
			n := draw()
			for drawn[n] {
				n = draw()
			}
			drawn[n], numbers[k] = true, n
			if docs[k], err = createDocument(in[i].acc, in[i].opt, cs[i].CreatedAt, n); err != nil {
				return nil, nil, fmt.Errorf("create account: %w", err)
			}
		}
		rs, err := runCreate(ctx, tx, docs)
		if err != nil {
			return nil, nil, fmt.Errorf("create account: %w", err)
		}
		var again []int
		for k, r := range rs {
			i, acc := pending[k], in[pending[k]].acc
			switch {
			case !r.ContractFound:
				errs[i] = problem.Invalidf(codeContractNotFound, "business.business_contract_identifier",
					"Business contract %q does not exist.", acc.Business.BusinessContractIdentifier)
			case !r.AccountID.Valid:
				again = append(again, i) // the number was taken: draw again
			case r.MissingTariff.Valid:
				errs[i] = problem.New(problem.Invalid, "tariff_code_not_found", "Tariff "+r.MissingTariff.String+" is no longer in the catalogue.")
			default:
				cs[i].AccountID, cs[i].ServiceAccountNumber = r.AccountID.Int64, numbers[k]
				if len(r.Outbox) > 0 {
					cs[i].Outbox = r.Outbox
				}
			}
		}
		pending = again
	}
	for _, i := range pending {
		errs[i] = fmt.Errorf("create account: no free service account number after 5 draws")
	}
	if err := insertLedgerTransactions(ctx, tx, in, cs, errs); err != nil {
		return nil, nil, fmt.Errorf("create account: %w", err)
	}
	return cs, errs, nil
}

// insertLedgerTransactionsSQL writes the transactions of the payload ledgers
// of several accounts with insert_transactions (db/migrations), the one
// home of a transaction's rows, which E7 writes with too. $1 is an array
// of {account_id, transactions}, transactions in postimport.InsertDocument's
// form.
const insertLedgerTransactionsSQL = `SELECT insert_transactions(x.account_id, x.transactions)
	FROM jsonb_to_recordset($1::jsonb) AS x (account_id bigint, transactions jsonb)`

// insertLedgerTransactions writes, inside tx, the ledger transactions of
// the accounts of in that createAccounts created (cs, without a refusal in
// errs), in one statement for all of them; a batch without ledger
// transactions costs nothing. The ledger row, with the balance these
// transactions make, is the creation statement's.
func insertLedgerTransactions(ctx context.Context, tx *db.Tx, in []toCreate, cs []created, errs []error) error {
	type item struct {
		AccountID    int64           `json:"account_id"`
		Transactions json.RawMessage `json:"transactions"`
	}
	var items []item
	for i, c := range in {
		if errs[i] != nil || cs[i].AccountID == 0 {
			continue
		}
		for _, l := range c.acc.Ledgers {
			ts := l.Transactions()
			if len(ts) == 0 {
				continue
			}
			doc, err := postimport.InsertDocument(ts)
			if err != nil {
				return err
			}
			items = append(items, item{AccountID: cs[i].AccountID, Transactions: doc})
		}
	}
	if len(items) == 0 {
		return nil
	}
	arg, err := json.Marshal(items)
	if err != nil {
		return fmt.Errorf("ledger transactions: encode: %w", err)
	}
	if _, err := tx.ExecContext(ctx, insertLedgerTransactionsSQL, arg); err != nil {
		return fmt.Errorf("ledger transactions: %w", err)
	}
	return nil
}

// codeContractNotFound is the refusal of an account whose business contract
// left the catalogue after validation.
const codeContractNotFound = "business_contract_not_found"

// refusedBeforeWriting reports whether err, an account's refusal from
// createAccounts, left nothing of the account written: its business
// contract was missing, so that its account row, which everything else
// joins, was never inserted.
func refusedBeforeWriting(err error) bool {
	pe, ok := problem.As(err)
	return ok && pe.Kind == problem.Invalid && pe.Code == codeContractNotFound
}

// runCreate runs createSQL for one document, createManySQL for several,
// and answers one createResult per document, in their order.
func runCreate(ctx context.Context, tx *db.Tx, docs [][]byte) ([]createResult, error) {
	query, arg := createSQL, docs[0]
	if len(docs) > 1 {
		query, arg = createManySQL, append(append([]byte{'['}, bytes.Join(docs, []byte{','})...), ']')
	}
	var rs []createResult
	if err := tx.SelectContext(ctx, &rs, query, arg); err != nil {
		return nil, err
	}
	if len(rs) != len(docs) {
		return nil, fmt.Errorf("%d results for %d accounts", len(rs), len(docs))
	}
	for k, r := range rs {
		if len(docs) > 1 && r.X != int64(k+1) {
			return nil, fmt.Errorf("result %d is for account %d", k+1, r.X)
		}
	}
	return rs, nil
}

// createResult is the row createSQL answers, or one of createManySQL's.
type createResult struct {
	// X is the account's position in createManySQL's array, from 1.
	X int64 `db:"x"`
	// AccountID is null when the service account number was taken, or the
	// business contract is missing.
	AccountID     sql.NullInt64  `db:"account_id"`
	ContractFound bool           `db:"contract_found"`
	MissingTariff sql.NullString `db:"missing_tariff"`
	Outbox        pq.Int64Array  `db:"outbox"`
}

// createSQL writes a whole account from the jsonb document $1 that
// createDocument encodes, and answers one createResult (without x).
// createManySQL is the same statement for several accounts: $1 is an array
// of such documents, and it answers one createResult per document, x being
// the document's position in the array, counted from 1. Both are rendered
// once, from sql/create.sql, which says how the statement is built.
var (
	createSQL     = renderCreate(false)
	createManySQL = renderCreate(true)
)

//go:embed sql/create.sql
var createSource string

var createTemplate = template.Must(template.New("create.sql").Parse(createSource))

// createItems is what sql/create.sql reads.
type createItems struct {
	// Many is true for createManySQL.
	Many bool
	// Notes is the WITH items that insert the accounts' notes.
	Notes string
	// Completed is the status of a process whose account exists
	// (jobs/status, held to the table's CHECK constraint).
	Completed string
}

// SameAccount is cond, a condition that matches rows of the same account by
// x, or true in createSQL, where it always holds.
func (c createItems) SameAccount(cond string) string {
	if !c.Many {
		return "true"
	}
	return cond
}

// renderCreate renders sql/create.sql: createManySQL when many, else
// createSQL.
func renderCreate(many bool) string {
	var b strings.Builder
	err := createTemplate.Execute(&b, createItems{Many: many, Notes: note.InsertCTE("docs", "doc->'notes'", "acc", !many),
		Completed: status.Completed})
	if err != nil {
		panic(fmt.Sprintf("render sql/create.sql: %v", err)) // the template is fixed: a bug
	}
	return "\n" + strings.TrimSpace(b.String())
}

// newServiceAccountNumber draws a random number of the form A-1A2B3C4D.
// crypto/rand.Read never fails (Go 1.24 and later).
func newServiceAccountNumber() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "A-" + strings.ToUpper(hex.EncodeToString(b))
}

func migrationEmail(cu account.Customer, number string) (subject, body string) {
	name := "customer"
	if cu.GivenName != nil {
		// The name sits inside a sentence of the body: line breaks, tabs and
		// other control characters in it become single spaces.
		if n := strings.Join(strings.FieldsFunc(*cu.GivenName, func(r rune) bool {
			return unicode.IsSpace(r) || unicode.IsControl(r)
		}), " "); n != "" {
			name = n
		}
	}
	return "Your account has moved to us",
		"Dear " + name + ",\n\nYour energy account has been moved to our billing platform. " +
			"Your new account number is " + number + ".\n\nNothing changes in your supply.\n"
}

func datePtr(d *validate.Date) *string {
	if d == nil {
		return nil
	}
	s := string(*d)
	return &s
}

func decPtr(d *validate.Decimal) *string {
	if d == nil {
		return nil
	}
	s := d.String()
	return &s
}

// lastBilledToDate is the latest last_billed_to_date of the account's
// supply points, or nil when none has one.
func lastBilledToDate(acc *account.Account) *string {
	d := acc.LastBilledToDate()
	if d == nil {
		return nil
	}
	s := string(*d)
	return &s
}

// The rows of the document createSQL reads, one type per table, with the
// payload indexes that link children to parents: i is a row's position
// among its siblings, k a supply point's or meter's index across the
// account, n an input order where the table has no position column.
// Dates and decimals travel as their text, so that PostgreSQL parses them
// exactly as it parsed the same text as a parameter.
type (
	createDoc struct {
		Account      accountRow         `json:"a"`
		Customers    []customerRow      `json:"c,omitempty"`
		Phones       []phoneRow         `json:"ph,omitempty"`
		Details      []detailRow        `json:"ud,omitempty"`
		Addresses    []addressRow       `json:"sa,omitempty"`
		SupplyPoints []supplyPointRow   `json:"sp,omitempty"`
		Electricity  []electricityRow   `json:"el,omitempty"`
		HeatPumps    []heatPumpRow      `json:"hp,omitempty"`
		LightPoles   []lightPoleRow     `json:"lp,omitempty"`
		WaterHeaters []waterHeaterRow   `json:"wh,omitempty"`
		Meters       []meterRow         `json:"m,omitempty"`
		Registers    []registerRow      `json:"r,omitempty"`
		Agreements   []agreementRow     `json:"ag,omitempty"`
		Readings     []readingRow       `json:"tr,omitempty"`
		Metadata     []account.Metadata `json:"md,omitempty"`
		Statements   []statementRow     `json:"st,omitempty"`
		Notes        json.RawMessage    `json:"notes,omitempty"`
		Emails       []emailRow         `json:"em,omitempty"`
		Ledger       *ledgerRow         `json:"lg,omitempty"`
	}
	// ledgerRow is the ledger of the payload as the ledger row stores it:
	// the balance its transactions make (E7's: what the customer owes) and
	// its last statement as sent.
	ledgerRow struct {
		Balance     string  `json:"balance"`
		Closing     *string `json:"closing"`
		Issued      *string `json:"issued"`
		LastBalance *string `json:"last_balance"`
	}
	// statementRow is a historical statement as E8 stores it; its fields
	// are the columns of historical_statements.
	statementRow struct {
		N int `json:"n"`
		postimport.Statement
	}
	accountRow struct {
		Number          string  `json:"number"`
		SupplierID      int64   `json:"supplier_id"`
		External        string  `json:"external"`
		ProcessID       int64   `json:"process_id"`
		TeamID          int64   `json:"team_id"`
		Contract        *string `json:"contract"`
		UnknownOccupier bool    `json:"unknown_occupier"`
		Street          *string `json:"street"`
		Locality        *string `json:"locality"`
		Area            *string `json:"area"`
		Country         string  `json:"country"`
		Postal          *string `json:"postal"`
		LastBilled      *string `json:"last_billed"`
		CreatedAt       string  `json:"created_at"`
	}
	customerRow struct {
		I                int     `json:"i"`
		GivenName        *string `json:"given_name"`
		FamilyName       *string `json:"family_name"`
		Email            *string `json:"email"`
		Mobile           *string `json:"mobile"`
		Landline         *string `json:"landline"`
		DateOfBirth      *string `json:"date_of_birth"`
		OptedIntoUpdates *bool   `json:"opted_into_updates"`
		OptedIntoOffers  *bool   `json:"opted_into_offers"`
		OptedIntoSMS     *bool   `json:"opted_into_sms"`
	}
	phoneRow struct {
		C     int    `json:"c"`
		I     int    `json:"i"`
		Phone string `json:"phone"`
	}
	detailRow struct {
		C         int    `json:"c"`
		I         int    `json:"i"`
		Namespace string `json:"namespace"`
		Value     string `json:"value"`
	}
	addressRow struct {
		I        int     `json:"i"`
		A1       string  `json:"a1"`
		A2       *string `json:"a2"`
		A3       *string `json:"a3"`
		A4       *string `json:"a4"`
		Postcode string  `json:"postcode"`
		Since    string  `json:"since"`
	}
	supplyPointRow struct {
		K          int             `json:"k"`
		SA         int             `json:"sa"`
		I          int             `json:"i"`
		SupplyType string          `json:"supply_type"`
		Start      string          `json:"start"`
		LastBilled *string         `json:"last_billed"`
		Fields     json.RawMessage `json:"fields,omitempty"`
	}
	electricityRow struct {
		SP                    int     `json:"sp"`
		Identifier            *string `json:"identifier"`
		InitialConnectionDate *string `json:"initial_connection_date"`
		LocationDescription   *string `json:"location_description"`
		BookNumber            *string `json:"book_number"`
		CallNumber            *int64  `json:"call_number"`
		EnergizationStatus    *string `json:"energization_status"`
	}
	heatPumpRow struct {
		SP                   int     `json:"sp"`
		SerialNumberInternal *string `json:"serial_number_internal"`
		SerialNumberExternal *string `json:"serial_number_external"`
		MakeModel            *string `json:"make_model"`
		Size                 *int64  `json:"size"`
		LocationDescription  *string `json:"location_description"`
		ProductNote          *string `json:"product_note"`
	}
	lightPoleRow struct {
		SP                    int     `json:"sp"`
		SerialNumber          *string `json:"serial_number"`
		SecondarySerialNumber *string `json:"secondary_serial_number"`
		ManufacturerName      *string `json:"manufacturer_name"`
		ModelName             *string `json:"model_name"`
		Location              *string `json:"location"`
		ProductNote           *string `json:"product_note"`
		InstalledAt           *string `json:"installed_at"`
	}
	waterHeaterRow struct {
		SP                int     `json:"sp"`
		SerialNumber      *string `json:"serial_number"`
		TankSize          *string `json:"tank_size"`
		TankType          *string `json:"tank_type"`
		TankConfiguration *string `json:"tank_configuration"`
	}
	meterRow struct {
		K                   int     `json:"k"`
		SP                  int     `json:"sp"`
		SerialNumber        string  `json:"serial_number"`
		Subgroup            *int64  `json:"subgroup"`
		SealDate            *string `json:"seal_date"`
		MeterNumber         *int64  `json:"meter_number"`
		Status              *string `json:"status"`
		ActiveFrom          *string `json:"active_from"`
		Manufacturer        *string `json:"manufacturer"`
		Model               *string `json:"model"`
		AmpsLow             *string `json:"amps_low"`
		AmpsHigh            *string `json:"amps_high"`
		VoltsLow            *string `json:"volts_low"`
		VoltsHigh           *string `json:"volts_high"`
		Phase               *string `json:"phase"`
		Elements            *string `json:"elements"`
		StockCode           *string `json:"stock_code"`
		IsBidirectional     *bool   `json:"is_bidirectional"`
		IsAnalog            *bool   `json:"is_analog"`
		CoverMaterial       *string `json:"cover_material"`
		WirePorts           *int64  `json:"wire_ports"`
		NetworkConnectivity *bool   `json:"network_connectivity"`
		Base                *string `json:"base"`
	}
	registerRow struct {
		N             int     `json:"n"`
		M             int     `json:"m"`
		RegisterType  string  `json:"register_type"`
		WholeDigits   *int64  `json:"whole_digits"`
		DecimalDigits *int64  `json:"decimal_digits"`
		ActiveFrom    *string `json:"active_from"`
		Multiplier    *string `json:"multiplier"`
	}
	agreementRow struct {
		N             int    `json:"n"`
		SP            int    `json:"sp"`
		TariffCode    string `json:"tariff_code"`
		EffectiveFrom string `json:"effective_from"`
	}
	readingRow struct {
		N            int    `json:"n"`
		SP           int    `json:"sp"`
		RegisterType string `json:"register_type"`
		ReadDate     string `json:"read_date"`
		Value        string `json:"value"`
	}
	emailRow struct {
		C         int    `json:"c"`
		ToAddress string `json:"to_address"`
		Subject   string `json:"subject"`
		Body      string `json:"body"`
	}
)

// createDocument encodes acc, under the service account number, as the
// document createSQL reads.
func createDocument(acc *account.Account, opt options, createdAt time.Time, number string) ([]byte, error) {
	ba := acc.EffectiveBillingAddress()
	d := createDoc{Account: accountRow{
		Number: number, SupplierID: acc.Supplier.ID, External: acc.ExternalAccountNumber, ProcessID: opt.ProcessID,
		TeamID: opt.OperationsTeamID, UnknownOccupier: acc.UnknownOccupier != nil && *acc.UnknownOccupier,
		Street: ba.StreetAddress, Locality: ba.Locality, Area: ba.AdministrativeArea, Country: ba.Country,
		Postal: ba.PostalCode, LastBilled: lastBilledToDate(acc), CreatedAt: createdAt.Format(time.RFC3339Nano),
	}}
	if acc.Business != nil {
		d.Account.Contract = &acc.Business.BusinessContractIdentifier
	}
	for i, cu := range acc.Customers {
		var prefs account.CustomerPreferences
		if cu.CustomerPreferences != nil {
			prefs = *cu.CustomerPreferences
		}
		d.Customers = append(d.Customers, customerRow{I: i, GivenName: cu.GivenName, FamilyName: cu.FamilyName,
			Email: cu.Email, Mobile: cu.Mobile, Landline: cu.Landline, DateOfBirth: datePtr(cu.DateOfBirth),
			OptedIntoUpdates: prefs.OptedIntoUpdates, OptedIntoOffers: prefs.OptedIntoOffers, OptedIntoSMS: prefs.OptedIntoSMS})
		for j, p := range cu.AlternativePhoneNumbers {
			d.Phones = append(d.Phones, phoneRow{C: i, I: j, Phone: p.PhoneNumber})
		}
		for j, u := range cu.UserDetails {
			d.Details = append(d.Details, detailRow{C: i, I: j, Namespace: u.Namespace, Value: u.Value})
		}
		if acc.Supplier.MigrationEmails && cu.Email != nil && *cu.Email != "" {
			subject, body := migrationEmail(cu, number)
			d.Emails = append(d.Emails, emailRow{C: i, ToAddress: *cu.Email, Subject: subject, Body: body})
		}
	}
	for i, sa := range acc.SupplyAddresses {
		d.Addresses = append(d.Addresses, addressRow{I: i, A1: sa.SupplyAddress1, A2: sa.SupplyAddress2,
			A3: sa.SupplyAddress3, A4: sa.SupplyAddress4, Postcode: sa.SupplyPostcode,
			Since: string(sa.CustomerAtSupplyAddressFromDate)})
		for j, sp := range sa.SupplyPoints {
			if err := d.addSupplyPoint(i, j, sp); err != nil {
				return nil, err
			}
		}
	}
	d.Metadata = acc.Metadata
	// Validation allows one ledger at most.
	for _, l := range acc.Ledgers {
		row := &ledgerRow{Balance: postimport.LedgerBalance(l.Transactions()).String(),
			Closing: datePtr(l.LastStatementClosingDate), Issued: datePtr(l.LastStatementIssueDate)}
		if l.LastStatementBalance != nil {
			s := l.LastStatementBalance.String()
			row.LastBalance = &s
		}
		d.Ledger = row
	}
	for i, st := range acc.Statements {
		d.Statements = append(d.Statements, statementRow{N: i, Statement: st})
	}
	if len(acc.Notes) > 0 {
		notes, err := note.InsertRows(acc.Notes, opt.Now)
		if err != nil {
			return nil, err
		}
		d.Notes = notes
	}
	return json.Marshal(d)
}

// addSupplyPoint adds supply point j of address i with its type-specific
// row, meters, registers, agreements and transfer readings.
func (d *createDoc) addSupplyPoint(i, j int, sp account.SupplyPoint) error {
	k := len(d.SupplyPoints)
	row := supplyPointRow{K: k, SA: i, I: j, SupplyType: sp.SupplyType, Start: string(sp.SupplyStartDate),
		LastBilled: datePtr(sp.LastBilledToDate)}
	// A supply type without a row layout of its own keeps its other fields,
	// as sent, in fields.
	if !account.HasOwnLayout(sp.SupplyType) {
		other := sp.Other
		if other == nil {
			other = map[string]json.RawMessage{}
		}
		b, err := json.Marshal(other)
		if err != nil {
			return fmt.Errorf("supply point fields: %w", err)
		}
		row.Fields = b
	}
	d.SupplyPoints = append(d.SupplyPoints, row)
	switch sp.SupplyType {
	case account.SupplyElectricity:
		d.Electricity = append(d.Electricity, electricityRow{SP: k, Identifier: sp.Identifier,
			InitialConnectionDate: datePtr(sp.InitialConnectionDate), LocationDescription: sp.LocationDescription,
			BookNumber: sp.BookNumber, CallNumber: sp.CallNumber, EnergizationStatus: sp.EnergizationStatus})
	case account.SupplyHeatPump:
		d.HeatPumps = append(d.HeatPumps, heatPumpRow{SP: k, SerialNumberInternal: sp.SerialNumberInternal,
			SerialNumberExternal: sp.SerialNumberExternal, MakeModel: sp.MakeModel, Size: sp.Size,
			LocationDescription: sp.LocationDescription, ProductNote: sp.ProductNote})
	case account.SupplyLight, account.SupplyPole:
		d.LightPoles = append(d.LightPoles, lightPoleRow{SP: k, SerialNumber: sp.SerialNumber,
			SecondarySerialNumber: sp.SecondarySerialNumber, ManufacturerName: sp.ManufacturerName,
			ModelName: sp.ModelName, Location: sp.Location, ProductNote: sp.ProductNote, InstalledAt: datePtr(sp.InstalledAt)})
	case account.SupplyWaterHeater:
		d.WaterHeaters = append(d.WaterHeaters, waterHeaterRow{SP: k, SerialNumber: sp.SerialNumber,
			TankSize: sp.TankSize, TankType: sp.TankType, TankConfiguration: sp.TankConfiguration})
	}
	for _, m := range sp.Meters {
		mt := account.MeterType{}
		if m.MeterType != nil {
			mt = *m.MeterType
		}
		mk := len(d.Meters)
		d.Meters = append(d.Meters, meterRow{K: mk, SP: k, SerialNumber: m.SerialNumber, Subgroup: m.Subgroup,
			SealDate: datePtr(m.SealDate), MeterNumber: m.MeterNumber, Status: m.Status, ActiveFrom: datePtr(m.ActiveFrom),
			Manufacturer: mt.Manufacturer, Model: mt.Model, AmpsLow: decPtr(mt.AmpsLow), AmpsHigh: decPtr(mt.AmpsHigh),
			VoltsLow: decPtr(mt.VoltsLow), VoltsHigh: decPtr(mt.VoltsHigh), Phase: mt.Phase, Elements: decPtr(mt.Elements),
			StockCode: mt.StockCode, IsBidirectional: mt.IsBidirectional, IsAnalog: mt.IsAnalog,
			CoverMaterial: mt.CoverMaterial, WirePorts: mt.WirePorts, NetworkConnectivity: mt.NetworkConnectivity, Base: mt.Base})
		for _, r := range m.Registers {
			d.Registers = append(d.Registers, registerRow{N: len(d.Registers), M: mk, RegisterType: r.RegisterType,
				WholeDigits: r.WholeDigits, DecimalDigits: r.DecimalDigits, ActiveFrom: datePtr(r.ActiveFrom),
				Multiplier: decPtr(r.Multiplier)})
		}
	}
	for _, a := range sp.Agreements {
		d.Agreements = append(d.Agreements, agreementRow{N: len(d.Agreements), SP: k, TariffCode: a.TariffCode,
			EffectiveFrom: string(a.EffectiveFrom)})
	}
	for _, r := range sp.TransferReadings {
		d.Readings = append(d.Readings, readingRow{N: len(d.Readings), SP: k, RegisterType: r.RegisterType,
			ReadDate: string(r.ReadDate), Value: r.Value})
	}
	return nil
}
