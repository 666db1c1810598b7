package process

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// CreateOptions are the facts account creation needs beyond the payload.
type CreateOptions struct {
	ProcessID        int64
	OperationsTeamID int64
	Now              time.Time
	// Statements, when not nil, runs the creation statement prepared once
	// per pool connection instead of parsing it anew in every transaction.
	Statements *Statements
}

// Created describes a new account.
type Created struct {
	AccountID            int64
	ServiceAccountNumber string
	CreatedAt            time.Time
	// Outbox lists the e-mail outbox rows to send once the transaction commits.
	Outbox []int64
}

// CreateAccount writes a validated account and everything in it inside tx,
// and records its process (opt.ProcessID) as COMPLETED with the new number:
// the account with its ledger, customers, addresses, supply points with
// their type-specific rows, meters, registers, agreements, transfer readings,
// metadata, notes and, when the supplier wants them, migration e-mails in the
// outbox. The caller commits or rolls back.
//
// It is one statement (createSQL), whatever the size of the account: one
// INSERT per table inside a single WITH, fed from one jsonb document. A
// statement per row cost a round trip, and two process wake-ups, each.
//
// It returns a *problem.Error of Kind Invalid when the catalogue changed
// since validation (a tariff or contract disappeared); what was written is
// then for the caller to roll back.
func CreateAccount(ctx context.Context, tx *sqlx.Tx, acc *account.Account, opt CreateOptions) (Created, error) {
	c := Created{CreatedAt: opt.Now.UTC().Truncate(time.Microsecond)}
	run := func(doc []byte) (createResult, error) {
		var r createResult
		if opt.Statements != nil {
			stmt, err := opt.Statements.in(ctx, tx, createSQL)
			if err != nil {
				return r, fmt.Errorf("create account: %w", err)
			}
			return r, stmt.QueryRowxContext(ctx, doc).StructScan(&r)
		}
		return r, tx.QueryRowxContext(ctx, createSQL, doc).StructScan(&r)
	}
	// Service account numbers are random, so a clash is possible but rare;
	// ON CONFLICT on the number alone writes nothing and lets us draw again
	// without aborting the transaction. A clash on (supplier, external
	// account number) is not caught: it means the account exists, and the
	// error must surface.
	for attempt := 0; attempt < 5; attempt++ {
		number := newServiceAccountNumber()
		doc, err := createDocument(acc, opt, c.CreatedAt, number)
		if err != nil {
			return c, fmt.Errorf("create account: %w", err)
		}
		r, err := run(doc)
		if err != nil {
			return c, fmt.Errorf("create account: %w", err)
		}
		switch {
		case !r.ContractFound:
			return c, problem.Invalidf("business_contract_not_found", "business.business_contract_identifier",
				"Business contract %q does not exist.", acc.Business.BusinessContractIdentifier)
		case !r.AccountID.Valid:
			continue // the number was taken: draw again
		case r.MissingTariff.Valid:
			return c, problem.New(problem.Invalid, "tariff_code_not_found", "Tariff "+r.MissingTariff.String+" is no longer in the catalogue.")
		}
		c.AccountID, c.ServiceAccountNumber = r.AccountID.Int64, number
		if len(r.Outbox) > 0 {
			c.Outbox = r.Outbox
		}
		return c, nil
	}
	return c, fmt.Errorf("create account: no free service account number after 5 draws")
}

// createResult is the one row createSQL answers.
type createResult struct {
	// AccountID is null when the service account number was taken, or the
	// business contract is missing.
	AccountID     sql.NullInt64  `db:"account_id"`
	ContractFound bool           `db:"contract_found"`
	MissingTariff sql.NullString `db:"missing_tariff"`
	Outbox        pq.Int64Array  `db:"outbox"`
}

// createSQL writes a whole account from the jsonb document $1 that
// createDocument encodes. Rows that others refer to (customers, addresses,
// supply points, meters) get their ids in a materialised WITH item, drawn
// once per row in payload order, and their children join them by payload
// index. Every insert joins acc, so that an account row not written (its
// number was taken, or its business contract is missing) writes nothing at
// all. Inserts without explicit ids are ordered by payload index, so that
// ids follow the payload as they did when rows were written one by one.
// Foreign keys are checked at the end of the statement, when every row is in.
var createSQL = strings.Replace(createTemplate, "%NOTES%", note.InsertCTE("$1::jsonb->'notes'", "acc"), 1)

const createTemplate = `
WITH
acc_in AS (
	SELECT * FROM jsonb_to_record($1::jsonb->'a') AS x (number text, supplier_id bigint, external text,
		process_id bigint, team_id bigint, contract text, unknown_occupier boolean, street text, locality text,
		area text, country text, postal text, last_billed date, created_at timestamptz)),
contract AS (
	SELECT b.id FROM business_contracts b JOIN acc_in x ON b.supplier_id = x.supplier_id AND b.identifier = x.contract),
acc AS (
	INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id,
		operations_team_id, business_contract_id, unknown_occupier, billing_street_address, billing_locality,
		billing_administrative_area, billing_country, billing_postal_code, last_billed_to_date, created_at)
	SELECT x.number, x.supplier_id, x.external, x.process_id, x.team_id, (SELECT id FROM contract), x.unknown_occupier,
		x.street, x.locality, x.area, x.country, x.postal, x.last_billed, x.created_at
	FROM acc_in x
	WHERE x.contract IS NULL OR EXISTS (SELECT 1 FROM contract)
	ON CONFLICT (service_account_number) DO NOTHING
	RETURNING id, service_account_number, created_at, import_process_id),
ledger AS (INSERT INTO ledgers (account_id) SELECT id FROM acc),
cust AS MATERIALIZED (
	SELECT nextval('customers_id_seq') AS id, c.*
	FROM jsonb_to_recordset($1::jsonb->'c') AS c (i int, given_name text, family_name text, email text, mobile text,
		landline text, date_of_birth date, opted_into_updates boolean, opted_into_offers boolean, opted_into_sms boolean)),
cust_ins AS (
	INSERT INTO customers (id, account_id, position, given_name, family_name, email, mobile, landline,
		date_of_birth, opted_into_updates, opted_into_offers, opted_into_sms)
	SELECT c.id, acc.id, c.i, c.given_name, c.family_name, c.email, c.mobile, c.landline,
		c.date_of_birth, c.opted_into_updates, c.opted_into_offers, c.opted_into_sms
	FROM cust c, acc ORDER BY c.i),
phones AS (
	INSERT INTO customer_phone_numbers (customer_id, position, phone_number)
	SELECT c.id, p.i, p.phone
	FROM jsonb_to_recordset($1::jsonb->'ph') AS p (c int, i int, phone text) JOIN cust c ON c.i = p.c, acc),
details AS (
	INSERT INTO customer_user_details (customer_id, position, namespace, value)
	SELECT c.id, d.i, d.namespace, d.value
	FROM jsonb_to_recordset($1::jsonb->'ud') AS d (c int, i int, namespace text, value text) JOIN cust c ON c.i = d.c, acc),
addr AS MATERIALIZED (
	SELECT nextval('supply_addresses_id_seq') AS id, s.*
	FROM jsonb_to_recordset($1::jsonb->'sa') AS s (i int, a1 text, a2 text, a3 text, a4 text, postcode text, since date)),
addr_ins AS (
	INSERT INTO supply_addresses (id, account_id, position, supply_address1, supply_address2, supply_address3,
		supply_address4, supply_postcode, customer_at_supply_address_from_date)
	SELECT s.id, acc.id, s.i, s.a1, s.a2, s.a3, s.a4, s.postcode, s.since FROM addr s, acc ORDER BY s.i),
sp AS MATERIALIZED (
	SELECT nextval('supply_points_id_seq') AS id, p.*
	FROM jsonb_to_recordset($1::jsonb->'sp') AS p (k int, sa int, i int, supply_type text, start date,
		last_billed date, fields jsonb)),
sp_ins AS (
	INSERT INTO supply_points (id, account_id, supply_address_id, position, supply_type, supply_start_date,
		last_billed_to_date, fields)
	SELECT p.id, acc.id, s.id, p.i, p.supply_type, p.start, p.last_billed, p.fields
	FROM sp p JOIN addr s ON s.i = p.sa, acc ORDER BY p.k),
electricity AS (
	INSERT INTO electricity_supply_points (supply_point_id, account_id, identifier, initial_connection_date,
		location_description, book_number, call_number, energization_status)
	SELECT p.id, acc.id, e.identifier, e.initial_connection_date, e.location_description, e.book_number,
		e.call_number, e.energization_status
	FROM jsonb_to_recordset($1::jsonb->'el') AS e (sp int, identifier text, initial_connection_date date,
		location_description text, book_number text, call_number bigint, energization_status text)
	JOIN sp p ON p.k = e.sp, acc),
heat_pump AS (
	INSERT INTO heat_pump_supply_points (supply_point_id, serial_number_internal, serial_number_external,
		make_model, size, location_description, product_note)
	SELECT p.id, h.serial_number_internal, h.serial_number_external, h.make_model, h.size,
		h.location_description, h.product_note
	FROM jsonb_to_recordset($1::jsonb->'hp') AS h (sp int, serial_number_internal text, serial_number_external text,
		make_model text, size bigint, location_description text, product_note text)
	JOIN sp p ON p.k = h.sp, acc),
light_pole AS (
	INSERT INTO light_pole_supply_points (supply_point_id, serial_number, secondary_serial_number,
		manufacturer_name, model_name, location, product_note, installed_at)
	SELECT p.id, l.serial_number, l.secondary_serial_number, l.manufacturer_name, l.model_name, l.location,
		l.product_note, l.installed_at
	FROM jsonb_to_recordset($1::jsonb->'lp') AS l (sp int, serial_number text, secondary_serial_number text,
		manufacturer_name text, model_name text, location text, product_note text, installed_at date)
	JOIN sp p ON p.k = l.sp, acc),
water_heater AS (
	INSERT INTO water_heater_supply_points (supply_point_id, serial_number, tank_size, tank_type, tank_configuration)
	SELECT p.id, w.serial_number, w.tank_size, w.tank_type, w.tank_configuration
	FROM jsonb_to_recordset($1::jsonb->'wh') AS w (sp int, serial_number text, tank_size text, tank_type text,
		tank_configuration text)
	JOIN sp p ON p.k = w.sp, acc),
meter AS MATERIALIZED (
	SELECT nextval('meters_id_seq') AS id, m.*
	FROM jsonb_to_recordset($1::jsonb->'m') AS m (k int, sp int, serial_number text, subgroup bigint, seal_date date,
		meter_number bigint, status text, active_from date, manufacturer text, model text, amps_low numeric,
		amps_high numeric, volts_low numeric, volts_high numeric, phase text, elements numeric, stock_code text,
		is_bidirectional boolean, is_analog boolean, cover_material text, wire_ports bigint,
		network_connectivity boolean, base text)),
meter_ins AS (
	INSERT INTO meters (id, supply_point_id, account_id, serial_number, subgroup, seal_date, meter_number,
		status, active_from, manufacturer, model, amps_low, amps_high, volts_low, volts_high, phase, elements,
		stock_code, is_bidirectional, is_analog, cover_material, wire_ports, network_connectivity, base)
	SELECT m.id, p.id, acc.id, m.serial_number, m.subgroup, m.seal_date, m.meter_number, m.status, m.active_from,
		m.manufacturer, m.model, m.amps_low, m.amps_high, m.volts_low, m.volts_high, m.phase, m.elements,
		m.stock_code, m.is_bidirectional, m.is_analog, m.cover_material, m.wire_ports, m.network_connectivity, m.base
	FROM meter m JOIN sp p ON p.k = m.sp, acc ORDER BY m.k),
register AS (
	INSERT INTO registers (meter_id, register_type, whole_digits, decimal_digits, active_from, multiplier)
	SELECT m.id, r.register_type, r.whole_digits, r.decimal_digits, r.active_from, r.multiplier
	FROM jsonb_to_recordset($1::jsonb->'r') AS r (n int, m int, register_type text, whole_digits bigint,
		decimal_digits bigint, active_from date, multiplier numeric)
	JOIN meter m ON m.k = r.m, acc ORDER BY r.n),
agreement_in AS (
	SELECT * FROM jsonb_to_recordset($1::jsonb->'ag') AS g (n int, sp int, tariff_code text, effective_from date)),
agreement AS (
	INSERT INTO agreements (supply_point_id, tariff_id, effective_from)
	SELECT p.id, t.id, g.effective_from
	FROM agreement_in g JOIN sp p ON p.k = g.sp JOIN tariffs t ON t.code = g.tariff_code, acc ORDER BY g.n),
reading AS (
	INSERT INTO transfer_readings (supply_point_id, register_type, read_date, value)
	SELECT p.id, r.register_type, r.read_date, r.value
	FROM jsonb_to_recordset($1::jsonb->'tr') AS r (n int, sp int, register_type text, read_date date, value text)
	JOIN sp p ON p.k = r.sp, acc ORDER BY r.n),
metadata AS (
	INSERT INTO account_metadata (account_id, key, value)
	SELECT acc.id, x.key, x.value FROM jsonb_to_recordset($1::jsonb->'md') AS x (key text, value jsonb), acc),
` + "%NOTES%" + `,
email AS (
	INSERT INTO email_outbox (account_id, customer_id, to_address, subject, body)
	SELECT acc.id, c.id, e.to_address, e.subject, e.body
	FROM jsonb_to_recordset($1::jsonb->'em') AS e (c int, to_address text, subject text, body text)
	JOIN cust c ON c.i = e.c, acc ORDER BY e.c
	RETURNING id),
completed AS (
	UPDATE import_processes p SET status = 'COMPLETED', service_account_number = acc.service_account_number,
		account_created_at = acc.created_at, last_error = NULL, updated_at = now()
	FROM acc WHERE p.id = acc.import_process_id)
SELECT (SELECT id FROM acc) AS account_id,
	(SELECT contract IS NULL FROM acc_in) OR EXISTS (SELECT 1 FROM contract) AS contract_found,
	(SELECT g.tariff_code FROM agreement_in g WHERE NOT EXISTS (SELECT 1 FROM tariffs t WHERE t.code = g.tariff_code)
		ORDER BY g.n LIMIT 1) AS missing_tariff,
	ARRAY(SELECT id FROM email ORDER BY id) AS outbox`

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
	var lastBilled *string
	for _, sa := range acc.SupplyAddresses {
		for _, sp := range sa.SupplyPoints {
			if sp.LastBilledToDate != nil && (lastBilled == nil || string(*sp.LastBilledToDate) > *lastBilled) {
				d := string(*sp.LastBilledToDate)
				lastBilled = &d
			}
		}
	}
	return lastBilled
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
		Notes        json.RawMessage    `json:"notes,omitempty"`
		Emails       []emailRow         `json:"em,omitempty"`
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
func createDocument(acc *account.Account, opt CreateOptions, createdAt time.Time, number string) ([]byte, error) {
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

// CreateStatement returns account creation's statement and its one argument
// for acc under the service account number, without the reads, locks and
// checks around it, so that a benchmark can measure the database's share of
// a creation against the whole.
func CreateStatement(acc *account.Account, opt CreateOptions, number string) (query string, arg []byte, err error) {
	arg, err = createDocument(acc, opt, opt.Now.UTC().Truncate(time.Microsecond), number)
	return createSQL, arg, err
}
