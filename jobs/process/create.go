package process

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
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
	cs, errs, err := createAccounts(ctx, tx, opt.Statements, []toCreate{{acc, opt}}, newServiceAccountNumber)
	if err != nil {
		return Created{CreatedAt: createdAt(opt)}, err
	}
	return cs[0], errs[0]
}

// toCreate is one account of createAccounts.
type toCreate struct {
	acc *account.Account
	opt CreateOptions
}

func createdAt(opt CreateOptions) time.Time { return opt.Now.UTC().Truncate(time.Microsecond) }

// createAccounts writes the accounts of in inside tx, as CreateAccount
// writes one, and answers each one's Created or refusal in errs. A lone
// account runs createSQL; several run createManySQL, one execution for all
// of them. err is a failure of the statement, after which tx must be rolled
// back.
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
func createAccounts(ctx context.Context, tx *sqlx.Tx, stmts *Statements, in []toCreate, draw func() string) (cs []Created, errs []error, err error) {
	cs, errs = make([]Created, len(in)), make([]error, len(in))
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
		rs, err := runCreate(ctx, tx, stmts, docs)
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
	return cs, errs, nil
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
func runCreate(ctx context.Context, tx *sqlx.Tx, stmts *Statements, docs [][]byte) ([]createResult, error) {
	query, arg := createSQL, docs[0]
	if len(docs) > 1 {
		query, arg = createManySQL, append(append([]byte{'['}, bytes.Join(docs, []byte{','})...), ']')
	}
	var rs []createResult
	if stmts != nil {
		stmt, err := stmts.In(ctx, tx, query)
		if err != nil {
			return nil, err
		}
		if err := stmt.SelectContext(ctx, &rs, arg); err != nil {
			return nil, err
		}
	} else if err := tx.SelectContext(ctx, &rs, query, arg); err != nil {
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
// createManySQL is the same statement for several accounts: $1 is an
// array of such documents, and it answers one createResult per document,
// x being the document's position in the array, counted from 1. Both are
// createTemplate, which reads the documents from its item docs, one row
// (x, doc) per account.
//
// Rows that others refer to (customers, addresses, supply points, meters)
// get their ids in a materialised WITH item, drawn once per row in the
// order of x and then of the payload, and their children join them by x
// and payload index. Every insert joins acc by x, so that an account row
// not written (its number was taken, or its business contract is missing)
// writes nothing at all for that account. Inserts into tables with serial
// ids are ordered by x and payload index, so that ids follow the payloads
// as they did when rows were written one by one, account after account;
// the others are not ordered (a sort per item costs every execution).
// Foreign keys are checked at the end of the statement, when every row is
// in.
var (
	createSQL = sameX.ReplaceAllString(strings.NewReplacer(
		"%DOCS%", `NOT MATERIALIZED (SELECT 1::bigint AS x, $1::jsonb AS doc)`,
		"%X%", "",
		"%NOTES%", note.InsertCTE("docs", "doc->'notes'", "acc"),
	).Replace(createTemplate), "true")
	createManySQL = strings.NewReplacer(
		"%DOCS%", `MATERIALIZED (SELECT d.x, d.doc FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS d (doc, x))`,
		"%X%", "x.x, ",
		"%NOTES%", note.InsertCTE("docs", "doc->'notes'", "acc"),
	).Replace(createTemplate)
)

// sameX matches the conditions of createTemplate that match rows of the
// same account by x. With one document they always hold, and createSQL
// drops them: the planner then joins the items as the one-account
// statement always did, without hashing on x (about 0.25 ms of its 1.3 ms
// per execution, in EXPLAIN ANALYZE).
var sameX = regexp.MustCompile(`\b[a-z]+\.x = [a-z]+\.x\b`)

// createTemplate is createSQL and createManySQL with %DOCS% for the query
// that reads the documents, %X% for x in the answer, and %NOTES% for the
// notes' items.
const createTemplate = `
WITH
docs AS %DOCS%,
acc_in AS (
	SELECT s.x, a.* FROM docs s CROSS JOIN jsonb_to_record(s.doc->'a') AS a (number text, supplier_id bigint,
		external text, process_id bigint, team_id bigint, contract text, unknown_occupier boolean, street text,
		locality text, area text, country text, postal text, last_billed date, created_at timestamptz)),
contract AS (
	SELECT x.x, b.id FROM business_contracts b JOIN acc_in x ON b.supplier_id = x.supplier_id AND b.identifier = x.contract),
acc_new AS (
	INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id,
		operations_team_id, business_contract_id, unknown_occupier, billing_street_address, billing_locality,
		billing_administrative_area, billing_country, billing_postal_code, last_billed_to_date, created_at)
	SELECT x.number, x.supplier_id, x.external, x.process_id, x.team_id, c.id, x.unknown_occupier,
		x.street, x.locality, x.area, x.country, x.postal, x.last_billed, x.created_at
	FROM acc_in x LEFT JOIN contract c ON c.x = x.x
	WHERE x.contract IS NULL OR c.id IS NOT NULL
	ORDER BY x.x
	ON CONFLICT (service_account_number) DO NOTHING
	RETURNING id, service_account_number, created_at, import_process_id),
acc AS (
	SELECT x.x, a.id, a.service_account_number, a.created_at, a.import_process_id
	FROM acc_new a JOIN acc_in x ON x.number = a.service_account_number),
ledger AS (INSERT INTO ledgers (account_id) SELECT id FROM acc),
cust AS MATERIALIZED (
	SELECT nextval('customers_id_seq') AS id, s.x, c.*
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'c') AS c (i int, given_name text, family_name text, email text,
		mobile text, landline text, date_of_birth date, opted_into_updates boolean, opted_into_offers boolean,
		opted_into_sms boolean)
	ORDER BY s.x, c.i),
cust_ins AS (
	INSERT INTO customers (id, account_id, position, given_name, family_name, email, mobile, landline,
		date_of_birth, opted_into_updates, opted_into_offers, opted_into_sms)
	SELECT c.id, acc.id, c.i, c.given_name, c.family_name, c.email, c.mobile, c.landline,
		c.date_of_birth, c.opted_into_updates, c.opted_into_offers, c.opted_into_sms
	FROM cust c JOIN acc ON acc.x = c.x ORDER BY c.x, c.i),
phones AS (
	INSERT INTO customer_phone_numbers (customer_id, position, phone_number)
	SELECT c.id, p.i, p.phone
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'ph') AS p (c int, i int, phone text)
	JOIN cust c ON c.x = s.x AND c.i = p.c JOIN acc ON acc.x = s.x),
details AS (
	INSERT INTO customer_user_details (customer_id, position, namespace, value)
	SELECT c.id, d.i, d.namespace, d.value
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'ud') AS d (c int, i int, namespace text, value text)
	JOIN cust c ON c.x = s.x AND c.i = d.c JOIN acc ON acc.x = s.x),
addr AS MATERIALIZED (
	SELECT nextval('supply_addresses_id_seq') AS id, s.x, a.*
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'sa') AS a (i int, a1 text, a2 text, a3 text, a4 text,
		postcode text, since date)
	ORDER BY s.x, a.i),
addr_ins AS (
	INSERT INTO supply_addresses (id, account_id, position, supply_address1, supply_address2, supply_address3,
		supply_address4, supply_postcode, customer_at_supply_address_from_date)
	SELECT a.id, acc.id, a.i, a.a1, a.a2, a.a3, a.a4, a.postcode, a.since
	FROM addr a JOIN acc ON acc.x = a.x ORDER BY a.x, a.i),
sp AS MATERIALIZED (
	SELECT nextval('supply_points_id_seq') AS id, s.x, p.*
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'sp') AS p (k int, sa int, i int, supply_type text, start date,
		last_billed date, fields jsonb)
	ORDER BY s.x, p.k),
sp_ins AS (
	INSERT INTO supply_points (id, account_id, supply_address_id, position, supply_type, supply_start_date,
		last_billed_to_date, fields)
	SELECT p.id, acc.id, a.id, p.i, p.supply_type, p.start, p.last_billed, p.fields
	FROM sp p JOIN addr a ON a.x = p.x AND a.i = p.sa JOIN acc ON acc.x = p.x ORDER BY p.x, p.k),
electricity AS (
	INSERT INTO electricity_supply_points (supply_point_id, account_id, identifier, initial_connection_date,
		location_description, book_number, call_number, energization_status)
	SELECT p.id, acc.id, e.identifier, e.initial_connection_date, e.location_description, e.book_number,
		e.call_number, e.energization_status
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'el') AS e (sp int, identifier text, initial_connection_date date,
		location_description text, book_number text, call_number bigint, energization_status text)
	JOIN sp p ON p.x = s.x AND p.k = e.sp JOIN acc ON acc.x = s.x),
heat_pump AS (
	INSERT INTO heat_pump_supply_points (supply_point_id, serial_number_internal, serial_number_external,
		make_model, size, location_description, product_note)
	SELECT p.id, h.serial_number_internal, h.serial_number_external, h.make_model, h.size,
		h.location_description, h.product_note
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'hp') AS h (sp int, serial_number_internal text,
		serial_number_external text, make_model text, size bigint, location_description text, product_note text)
	JOIN sp p ON p.x = s.x AND p.k = h.sp JOIN acc ON acc.x = s.x),
light_pole AS (
	INSERT INTO light_pole_supply_points (supply_point_id, serial_number, secondary_serial_number,
		manufacturer_name, model_name, location, product_note, installed_at)
	SELECT p.id, l.serial_number, l.secondary_serial_number, l.manufacturer_name, l.model_name, l.location,
		l.product_note, l.installed_at
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'lp') AS l (sp int, serial_number text,
		secondary_serial_number text, manufacturer_name text, model_name text, location text, product_note text,
		installed_at date)
	JOIN sp p ON p.x = s.x AND p.k = l.sp JOIN acc ON acc.x = s.x),
water_heater AS (
	INSERT INTO water_heater_supply_points (supply_point_id, serial_number, tank_size, tank_type, tank_configuration)
	SELECT p.id, w.serial_number, w.tank_size, w.tank_type, w.tank_configuration
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'wh') AS w (sp int, serial_number text, tank_size text,
		tank_type text, tank_configuration text)
	JOIN sp p ON p.x = s.x AND p.k = w.sp JOIN acc ON acc.x = s.x),
meter AS MATERIALIZED (
	SELECT nextval('meters_id_seq') AS id, s.x, m.*
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'m') AS m (k int, sp int, serial_number text, subgroup bigint,
		seal_date date, meter_number bigint, status text, active_from date, manufacturer text, model text,
		amps_low numeric, amps_high numeric, volts_low numeric, volts_high numeric, phase text, elements numeric,
		stock_code text, is_bidirectional boolean, is_analog boolean, cover_material text, wire_ports bigint,
		network_connectivity boolean, base text)
	ORDER BY s.x, m.k),
meter_ins AS (
	INSERT INTO meters (id, supply_point_id, account_id, serial_number, subgroup, seal_date, meter_number,
		status, active_from, manufacturer, model, amps_low, amps_high, volts_low, volts_high, phase, elements,
		stock_code, is_bidirectional, is_analog, cover_material, wire_ports, network_connectivity, base)
	SELECT m.id, p.id, acc.id, m.serial_number, m.subgroup, m.seal_date, m.meter_number, m.status, m.active_from,
		m.manufacturer, m.model, m.amps_low, m.amps_high, m.volts_low, m.volts_high, m.phase, m.elements,
		m.stock_code, m.is_bidirectional, m.is_analog, m.cover_material, m.wire_ports, m.network_connectivity, m.base
	FROM meter m JOIN sp p ON p.x = m.x AND p.k = m.sp JOIN acc ON acc.x = m.x ORDER BY m.x, m.k),
register AS (
	INSERT INTO registers (meter_id, register_type, whole_digits, decimal_digits, active_from, multiplier)
	SELECT m.id, r.register_type, r.whole_digits, r.decimal_digits, r.active_from, r.multiplier
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'r') AS r (n int, m int, register_type text, whole_digits bigint,
		decimal_digits bigint, active_from date, multiplier numeric)
	JOIN meter m ON m.x = s.x AND m.k = r.m JOIN acc ON acc.x = s.x
	ORDER BY s.x, r.n),
agreement_in AS (
	SELECT s.x, g.* FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'ag') AS g (n int, sp int, tariff_code text,
		effective_from date)),
agreement AS (
	INSERT INTO agreements (supply_point_id, tariff_id, effective_from)
	SELECT p.id, t.id, g.effective_from
	FROM agreement_in g JOIN sp p ON p.x = g.x AND p.k = g.sp JOIN tariffs t ON t.code = g.tariff_code
	JOIN acc ON acc.x = g.x
	ORDER BY g.x, g.n),
reading AS (
	INSERT INTO transfer_readings (supply_point_id, register_type, read_date, value)
	SELECT p.id, r.register_type, r.read_date, r.value
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'tr') AS r (n int, sp int, register_type text, read_date date,
		value text)
	JOIN sp p ON p.x = s.x AND p.k = r.sp JOIN acc ON acc.x = s.x
	ORDER BY s.x, r.n),
metadata AS (
	INSERT INTO account_metadata (account_id, key, value)
	SELECT acc.id, m.key, m.value
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'md') AS m (key text, value jsonb) JOIN acc ON acc.x = s.x),
` + "%NOTES%" + `,
email AS (
	INSERT INTO email_outbox (account_id, customer_id, to_address, subject, body)
	SELECT acc.id, c.id, e.to_address, e.subject, e.body
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'em') AS e (c int, to_address text, subject text, body text)
	JOIN cust c ON c.x = s.x AND c.i = e.c JOIN acc ON acc.x = s.x
	ORDER BY s.x, e.c
	RETURNING id, account_id),
completed AS (
	UPDATE import_processes p SET status = 'COMPLETED', service_account_number = acc.service_account_number,
		account_created_at = acc.created_at, last_error = NULL, updated_at = now()
	FROM acc WHERE p.id = acc.import_process_id)
SELECT %X%a.id AS account_id,
	x.contract IS NULL OR c.id IS NOT NULL AS contract_found,
	(SELECT g.tariff_code FROM agreement_in g
		WHERE g.x = x.x AND NOT EXISTS (SELECT 1 FROM tariffs t WHERE t.code = g.tariff_code)
		ORDER BY g.n LIMIT 1) AS missing_tariff,
	ARRAY(SELECT e.id FROM email e WHERE e.account_id = a.id ORDER BY e.id) AS outbox
FROM acc_in x LEFT JOIN acc a ON a.x = x.x LEFT JOIN contract c ON c.x = x.x
ORDER BY x.x`

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
