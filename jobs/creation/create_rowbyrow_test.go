package creation

// The row-by-row account writer that createSQL replaced, kept as the
// reference the differential test holds the set-based statement against: it
// wrote one statement per row, so its rows are easy to check by eye.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/note"
	"github.com/bulkimport/bulkimport/jobs/postimport"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// createAccountRowByRow is CreateAccount as it was before createSQL, minus
// the process row's completion, which Run wrote then.
func createAccountRowByRow(ctx context.Context, tx *db.Tx, acc *account.Account, opt options) (created, error) {
	c := created{CreatedAt: opt.Now.UTC().Truncate(time.Microsecond)}
	contractID, err := rbrContractID(ctx, tx, acc)
	if err != nil {
		return c, err
	}
	if c.AccountID, c.ServiceAccountNumber, err = rbrInsertAccount(ctx, tx, acc, opt, contractID, c.CreatedAt); err != nil {
		return c, err
	}
	w := rbrWriter{ctx: ctx, tx: tx, accountID: c.AccountID}
	w.exec(`INSERT INTO ledgers (account_id) VALUES ($1)`, c.AccountID)
	customerIDs := w.customers(acc.Customers)
	w.supplyAddresses(acc.SupplyAddresses)
	w.metadata(acc.Metadata)
	w.statements(acc.Statements)
	if w.err == nil {
		if err := note.Insert(ctx, tx, c.AccountID, acc.Notes, opt.Now); err != nil {
			w.err = fmt.Errorf("create account: %w", err)
		}
	}
	if acc.Supplier.MigrationEmails {
		c.Outbox = w.migrationEmails(acc.Customers, customerIDs, c.ServiceAccountNumber)
	}
	if w.err != nil {
		return c, w.err
	}
	return c, nil
}

// rbrContractID looks up the business contract the account names, or
// returns nil when it names none.
func rbrContractID(ctx context.Context, tx *db.Tx, acc *account.Account) (*int64, error) {
	if acc.Business == nil {
		return nil, nil
	}
	var id int64
	err := tx.GetContext(ctx, &id, `SELECT id FROM business_contracts WHERE supplier_id = $1 AND identifier = $2`,
		acc.Supplier.ID, acc.Business.BusinessContractIdentifier)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, problem.Invalidf("business_contract_not_found", "business.business_contract_identifier",
			"Business contract %q does not exist.", acc.Business.BusinessContractIdentifier)
	case err != nil:
		// Not a verdict on the data: the task is retried.
		return nil, fmt.Errorf("create: business contract: %w", err)
	}
	return &id, nil
}

// rbrInsertAccount writes the accounts row under a fresh service account
// number and returns its id and number.
//
// Service account numbers are random, so a clash is possible but rare; ON
// CONFLICT on the number alone lets us draw again without aborting the
// transaction. A clash on (supplier, external account number) is not caught:
// it means the account exists, and the error must surface.
func rbrInsertAccount(ctx context.Context, tx *db.Tx, acc *account.Account, opt options, contractID *int64, createdAt time.Time) (int64, string, error) {
	ba := acc.EffectiveBillingAddress()
	lastBilled := lastBilledToDate(acc)
	for attempt := 0; attempt < 5; attempt++ {
		number := newServiceAccountNumber()
		var id int64
		err := tx.GetContext(ctx, &id, `
			INSERT INTO accounts (service_account_number, supplier_id, external_account_number, import_process_id,
				operations_team_id, business_contract_id, unknown_occupier, billing_street_address, billing_locality,
				billing_administrative_area, billing_country, billing_postal_code, last_billed_to_date, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			ON CONFLICT (service_account_number) DO NOTHING RETURNING id`,
			number, acc.Supplier.ID, acc.ExternalAccountNumber, opt.ProcessID, opt.OperationsTeamID, contractID,
			acc.UnknownOccupier != nil && *acc.UnknownOccupier, ba.StreetAddress, ba.Locality, ba.AdministrativeArea,
			ba.Country, ba.PostalCode, lastBilled, createdAt)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // the number was taken: draw again
		case err != nil:
			return 0, "", fmt.Errorf("create account: %w", err)
		}
		return id, number, nil
	}
	return 0, "", fmt.Errorf("create account: no free service account number after 5 draws")
}

// customers writes the customers with their phone numbers and user
// details, and returns their ids in payload order.
func (w *rbrWriter) customers(customers []account.Customer) []int64 {
	ids := make([]int64, len(customers))
	for i, cu := range customers {
		var prefs account.CustomerPreferences
		if cu.CustomerPreferences != nil {
			prefs = *cu.CustomerPreferences
		}
		ids[i] = w.id(`INSERT INTO customers (account_id, position, given_name, family_name, email, mobile, landline,
			date_of_birth, opted_into_updates, opted_into_offers, opted_into_sms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
			w.accountID, i, cu.GivenName, cu.FamilyName, cu.Email, cu.Mobile, cu.Landline, datePtr(cu.DateOfBirth),
			prefs.OptedIntoUpdates, prefs.OptedIntoOffers, prefs.OptedIntoSMS)
		for j, p := range cu.AlternativePhoneNumbers {
			w.exec(`INSERT INTO customer_phone_numbers (customer_id, position, phone_number) VALUES ($1, $2, $3)`, ids[i], j, p.PhoneNumber)
		}
		for j, d := range cu.UserDetails {
			w.exec(`INSERT INTO customer_user_details (customer_id, position, namespace, value) VALUES ($1, $2, $3, $4)`, ids[i], j, d.Namespace, d.Value)
		}
	}
	return ids
}

// supplyAddresses writes the supply addresses and their supply points.
func (w *rbrWriter) supplyAddresses(addresses []account.SupplyAddress) {
	for i, sa := range addresses {
		addrID := w.id(`INSERT INTO supply_addresses (account_id, position, supply_address1, supply_address2, supply_address3,
			supply_address4, supply_postcode, customer_at_supply_address_from_date)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
			w.accountID, i, sa.SupplyAddress1, sa.SupplyAddress2, sa.SupplyAddress3, sa.SupplyAddress4, sa.SupplyPostcode,
			string(sa.CustomerAtSupplyAddressFromDate))
		for j, sp := range sa.SupplyPoints {
			w.supplyPoint(addrID, j, sp)
		}
	}
}

// statements writes the account's historical statements, in order.
func (w *rbrWriter) statements(sts []postimport.Statement) {
	for _, st := range sts {
		var issued *string
		if st.IssuedDate != nil {
			d := string(*st.IssuedDate)
			issued = &d
		}
		w.exec(`INSERT INTO historical_statements (account_id, statement_id, number, bill_period_from_date,
			bill_period_to_date, issued_date, gross_amount, statement_path) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			w.accountID, st.StatementID, st.Number, string(st.BillPeriodFromDate), string(st.BillPeriodToDate), issued,
			st.GrossAmount, st.StatementPath)
	}
}

// metadata writes the account's metadata entries.
func (w *rbrWriter) metadata(entries []account.Metadata) {
	for _, m := range entries {
		w.exec(`INSERT INTO account_metadata (account_id, key, value) VALUES ($1, $2, $3)`, w.accountID, m.Key, []byte(m.Value))
	}
}

// migrationEmails queues a migration e-mail in the outbox for every customer
// with an address, and returns the outbox rows to send after the commit.
func (w *rbrWriter) migrationEmails(customers []account.Customer, customerIDs []int64, number string) []int64 {
	var outbox []int64
	for i, cu := range customers {
		if cu.Email == nil || *cu.Email == "" {
			continue
		}
		subject, body := migrationEmail(cu, number)
		outbox = append(outbox, w.id(`INSERT INTO email_outbox (account_id, customer_id, to_address, subject, body)
			VALUES ($1, $2, $3, $4, $5) RETURNING id`, w.accountID, customerIDs[i], *cu.Email, subject, body))
	}
	return outbox
}

// rbrWriter runs a sequence of statements and keeps the first error, so that
// the long creation reads as the list of rows it writes.
type rbrWriter struct {
	ctx       context.Context
	tx        *db.Tx
	accountID int64
	err       error
}

func (w *rbrWriter) exec(q string, args ...any) {
	if w.err != nil {
		return
	}
	if _, err := w.tx.ExecContext(w.ctx, q, args...); err != nil {
		w.err = fmt.Errorf("create account: %w", err)
	}
}

func (w *rbrWriter) id(q string, args ...any) int64 {
	if w.err != nil {
		return 0
	}
	var id int64
	if err := w.tx.GetContext(w.ctx, &id, q, args...); err != nil {
		w.err = fmt.Errorf("create account: %w", err)
	}
	return id
}

func (w *rbrWriter) supplyPoint(addrID int64, pos int, sp account.SupplyPoint) {
	// A supply type without a row layout of its own keeps its other fields,
	// as sent, in fields.
	var fields *string
	if !account.HasOwnLayout(sp.SupplyType) {
		other := sp.Other
		if other == nil {
			other = map[string]json.RawMessage{}
		}
		b, err := json.Marshal(other)
		if err != nil {
			w.err = fmt.Errorf("create account: supply point fields: %w", err)
			return
		}
		f := string(b)
		fields = &f
	}
	spID := w.id(`INSERT INTO supply_points (account_id, supply_address_id, position, supply_type, supply_start_date, last_billed_to_date, fields)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		w.accountID, addrID, pos, sp.SupplyType, string(sp.SupplyStartDate), datePtr(sp.LastBilledToDate), fields)
	switch sp.SupplyType {
	case "ELECTRICITY":
		w.exec(`INSERT INTO electricity_supply_points (supply_point_id, account_id, identifier, initial_connection_date,
			location_description, book_number, call_number, energization_status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			spID, w.accountID, sp.Identifier, datePtr(sp.InitialConnectionDate), sp.LocationDescription, sp.BookNumber,
			sp.CallNumber, sp.EnergizationStatus)
	case "HEAT_PUMP":
		w.exec(`INSERT INTO heat_pump_supply_points (supply_point_id, serial_number_internal, serial_number_external,
			make_model, size, location_description, product_note) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			spID, sp.SerialNumberInternal, sp.SerialNumberExternal, sp.MakeModel, sp.Size, sp.LocationDescription, sp.ProductNote)
	case "LIGHT", "POLE":
		w.exec(`INSERT INTO light_pole_supply_points (supply_point_id, serial_number, secondary_serial_number,
			manufacturer_name, model_name, location, product_note, installed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			spID, sp.SerialNumber, sp.SecondarySerialNumber, sp.ManufacturerName, sp.ModelName, sp.Location, sp.ProductNote,
			datePtr(sp.InstalledAt))
	case "WATER_HEATER":
		w.exec(`INSERT INTO water_heater_supply_points (supply_point_id, serial_number, tank_size, tank_type, tank_configuration)
			VALUES ($1, $2, $3, $4, $5)`, spID, sp.SerialNumber, sp.TankSize, sp.TankType, sp.TankConfiguration)
	}
	for _, m := range sp.Meters {
		mt := account.MeterType{}
		if m.MeterType != nil {
			mt = *m.MeterType
		}
		meterID := w.id(`INSERT INTO meters (supply_point_id, account_id, serial_number, subgroup, seal_date, meter_number,
			status, active_from, manufacturer, model, amps_low, amps_high, volts_low, volts_high, phase, elements,
			stock_code, is_bidirectional, is_analog, cover_material, wire_ports, network_connectivity, base)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23)
			RETURNING id`,
			spID, w.accountID, m.SerialNumber, m.Subgroup, datePtr(m.SealDate), m.MeterNumber, m.Status, datePtr(m.ActiveFrom),
			mt.Manufacturer, mt.Model, decPtr(mt.AmpsLow), decPtr(mt.AmpsHigh), decPtr(mt.VoltsLow), decPtr(mt.VoltsHigh),
			mt.Phase, decPtr(mt.Elements), mt.StockCode, mt.IsBidirectional, mt.IsAnalog, mt.CoverMaterial, mt.WirePorts,
			mt.NetworkConnectivity, mt.Base)
		for _, r := range m.Registers {
			w.exec(`INSERT INTO registers (meter_id, register_type, whole_digits, decimal_digits, active_from, multiplier)
				VALUES ($1, $2, $3, $4, $5, $6)`, meterID, r.RegisterType, r.WholeDigits, r.DecimalDigits,
				datePtr(r.ActiveFrom), decPtr(r.Multiplier))
		}
	}
	for _, a := range sp.Agreements {
		if w.err != nil {
			return
		}
		res, err := w.tx.ExecContext(w.ctx, `INSERT INTO agreements (supply_point_id, tariff_id, effective_from)
			SELECT $1, id, $3 FROM tariffs WHERE code = $2`, spID, a.TariffCode, string(a.EffectiveFrom))
		if err != nil {
			w.err = fmt.Errorf("create account: %w", err)
			return
		}
		if n, _ := res.RowsAffected(); n == 0 {
			w.err = problem.New(problem.Invalid, "tariff_code_not_found", "Tariff "+a.TariffCode+" is no longer in the catalogue.")
			return
		}
	}
	for _, r := range sp.TransferReadings {
		w.exec(`INSERT INTO transfer_readings (supply_point_id, register_type, read_date, value) VALUES ($1, $2, $3, $4)`,
			spID, r.RegisterType, string(r.ReadDate), r.Value)
	}
}
