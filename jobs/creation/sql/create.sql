{{- /*
The account creation statement: it writes whole accounts, one INSERT per
table inside a single WITH, from jsonb documents that createDocument
encodes, and answers one createResult per account. Rendered twice, once
for each value of .Many:

  - createSQL (.Many false): $1 is one document, and the answer has no x.
  - createManySQL (.Many true): $1 is an array of documents, and each
    answer's x is its document's position in the array, counted from 1.

Both read the documents from the item docs, one row (x, doc) per account.

The account's ledger row carries the balance its ledger's transactions
make and its last statement (lg); the transactions themselves are written
after this statement, in the same transaction, by insert_transactions, the
function E7 writes them with (createAccounts).

Rows that others refer to (customers, addresses, supply points, meters) get
their ids in a materialised WITH item, drawn once per row in the order of x
and then of the payload, and their children join them by x and payload
index. Every insert joins acc by x, so that an account row not written (its
number was taken, or its business contract is missing) writes nothing at all
for that account. Inserts into tables with serial ids are ordered by x and
payload index, so that ids follow the payloads as they did when rows were
written one by one, account after account; the others are not ordered (a
sort per item costs every execution). Foreign keys are checked at the end of
the statement, when every row is in.

.SameAccount writes a condition that matches rows of the same account by x.
With one document it always holds, and createSQL writes true instead: the
planner then joins the items without hashing on x, which EXPLAIN ANALYZE
shows to be a measurable share of a one-account execution. .Notes is the
notes' items, from jobs/note's own template (note.InsertCTE).
*/ -}}
WITH
docs AS {{if .Many -}}
	MATERIALIZED (SELECT d.x, d.doc FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS d (doc, x))
{{- else -}}
	NOT MATERIALIZED (SELECT 1::bigint AS x, $1::jsonb AS doc)
{{- end}},
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
	FROM acc_in x LEFT JOIN contract c ON {{.SameAccount "c.x = x.x"}}
	WHERE x.contract IS NULL OR c.id IS NOT NULL
	ORDER BY x.x
	ON CONFLICT (service_account_number) DO NOTHING
	RETURNING id, service_account_number, created_at, import_process_id),
acc AS (
	SELECT x.x, a.id, a.service_account_number, a.created_at, a.import_process_id
	FROM acc_new a JOIN acc_in x ON x.number = a.service_account_number),
ledger AS (
	INSERT INTO ledgers (account_id, balance, last_statement_closing_date, last_statement_issue_date, last_statement_balance)
	SELECT acc.id, 0.00 + COALESCE((s.doc->'lg'->>'balance')::numeric, 0), (s.doc->'lg'->>'closing')::date,
		(s.doc->'lg'->>'issued')::date, (s.doc->'lg'->>'last_balance')::numeric
	FROM acc JOIN docs s ON {{.SameAccount "s.x = acc.x"}}),
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
	FROM cust c JOIN acc ON {{.SameAccount "acc.x = c.x"}} ORDER BY c.x, c.i),
phones AS (
	INSERT INTO customer_phone_numbers (customer_id, position, phone_number)
	SELECT c.id, p.i, p.phone
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'ph') AS p (c int, i int, phone text)
	JOIN cust c ON {{.SameAccount "c.x = s.x"}} AND c.i = p.c JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
details AS (
	INSERT INTO customer_user_details (customer_id, position, namespace, value)
	SELECT c.id, d.i, d.namespace, d.value
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'ud') AS d (c int, i int, namespace text, value text)
	JOIN cust c ON {{.SameAccount "c.x = s.x"}} AND c.i = d.c JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
addr AS MATERIALIZED (
	SELECT nextval('supply_addresses_id_seq') AS id, s.x, a.*
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'sa') AS a (i int, a1 text, a2 text, a3 text, a4 text,
		postcode text, since date)
	ORDER BY s.x, a.i),
addr_ins AS (
	INSERT INTO supply_addresses (id, account_id, position, supply_address1, supply_address2, supply_address3,
		supply_address4, supply_postcode, customer_at_supply_address_from_date)
	SELECT a.id, acc.id, a.i, a.a1, a.a2, a.a3, a.a4, a.postcode, a.since
	FROM addr a JOIN acc ON {{.SameAccount "acc.x = a.x"}} ORDER BY a.x, a.i),
sp AS MATERIALIZED (
	SELECT nextval('supply_points_id_seq') AS id, s.x, p.*
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'sp') AS p (k int, sa int, i int, supply_type text, start date,
		last_billed date, fields jsonb)
	ORDER BY s.x, p.k),
sp_ins AS (
	INSERT INTO supply_points (id, account_id, supply_address_id, position, supply_type, supply_start_date,
		last_billed_to_date, fields)
	SELECT p.id, acc.id, a.id, p.i, p.supply_type, p.start, p.last_billed, p.fields
	FROM sp p JOIN addr a ON {{.SameAccount "a.x = p.x"}} AND a.i = p.sa JOIN acc ON {{.SameAccount "acc.x = p.x"}} ORDER BY p.x, p.k),
electricity AS (
	INSERT INTO electricity_supply_points (supply_point_id, account_id, identifier, initial_connection_date,
		location_description, book_number, call_number, energization_status)
	SELECT p.id, acc.id, e.identifier, e.initial_connection_date, e.location_description, e.book_number,
		e.call_number, e.energization_status
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'el') AS e (sp int, identifier text, initial_connection_date date,
		location_description text, book_number text, call_number bigint, energization_status text)
	JOIN sp p ON {{.SameAccount "p.x = s.x"}} AND p.k = e.sp JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
heat_pump AS (
	INSERT INTO heat_pump_supply_points (supply_point_id, serial_number_internal, serial_number_external,
		make_model, size, location_description, product_note)
	SELECT p.id, h.serial_number_internal, h.serial_number_external, h.make_model, h.size,
		h.location_description, h.product_note
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'hp') AS h (sp int, serial_number_internal text,
		serial_number_external text, make_model text, size bigint, location_description text, product_note text)
	JOIN sp p ON {{.SameAccount "p.x = s.x"}} AND p.k = h.sp JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
light_pole AS (
	INSERT INTO light_pole_supply_points (supply_point_id, serial_number, secondary_serial_number,
		manufacturer_name, model_name, location, product_note, installed_at)
	SELECT p.id, l.serial_number, l.secondary_serial_number, l.manufacturer_name, l.model_name, l.location,
		l.product_note, l.installed_at
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'lp') AS l (sp int, serial_number text,
		secondary_serial_number text, manufacturer_name text, model_name text, location text, product_note text,
		installed_at date)
	JOIN sp p ON {{.SameAccount "p.x = s.x"}} AND p.k = l.sp JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
water_heater AS (
	INSERT INTO water_heater_supply_points (supply_point_id, serial_number, tank_size, tank_type, tank_configuration)
	SELECT p.id, w.serial_number, w.tank_size, w.tank_type, w.tank_configuration
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'wh') AS w (sp int, serial_number text, tank_size text,
		tank_type text, tank_configuration text)
	JOIN sp p ON {{.SameAccount "p.x = s.x"}} AND p.k = w.sp JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
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
	FROM meter m JOIN sp p ON {{.SameAccount "p.x = m.x"}} AND p.k = m.sp JOIN acc ON {{.SameAccount "acc.x = m.x"}} ORDER BY m.x, m.k),
register AS (
	INSERT INTO registers (meter_id, register_type, whole_digits, decimal_digits, active_from, multiplier)
	SELECT m.id, r.register_type, r.whole_digits, r.decimal_digits, r.active_from, r.multiplier
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'r') AS r (n int, m int, register_type text, whole_digits bigint,
		decimal_digits bigint, active_from date, multiplier numeric)
	JOIN meter m ON {{.SameAccount "m.x = s.x"}} AND m.k = r.m JOIN acc ON {{.SameAccount "acc.x = s.x"}}
	ORDER BY s.x, r.n),
agreement_in AS (
	SELECT s.x, g.* FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'ag') AS g (n int, sp int, tariff_code text,
		effective_from date)),
agreement AS (
	INSERT INTO agreements (supply_point_id, tariff_id, effective_from)
	SELECT p.id, t.id, g.effective_from
	FROM agreement_in g JOIN sp p ON {{.SameAccount "p.x = g.x"}} AND p.k = g.sp JOIN tariffs t ON t.code = g.tariff_code
	JOIN acc ON {{.SameAccount "acc.x = g.x"}}
	ORDER BY g.x, g.n),
reading AS (
	INSERT INTO transfer_readings (supply_point_id, register_type, read_date, value)
	SELECT p.id, r.register_type, r.read_date, r.value
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'tr') AS r (n int, sp int, register_type text, read_date date,
		value text)
	JOIN sp p ON {{.SameAccount "p.x = s.x"}} AND p.k = r.sp JOIN acc ON {{.SameAccount "acc.x = s.x"}}
	ORDER BY s.x, r.n),
metadata AS (
	INSERT INTO account_metadata (account_id, key, value)
	SELECT acc.id, m.key, m.value
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'md') AS m (key text, value jsonb) JOIN acc ON {{.SameAccount "acc.x = s.x"}}),
statement AS (
	INSERT INTO historical_statements (account_id, statement_id, number, bill_period_from_date, bill_period_to_date,
		issued_date, gross_amount, statement_path)
	SELECT acc.id, t.statement_id, t.number, t.bill_period_from_date, t.bill_period_to_date, t.issued_date,
		t.gross_amount, t.statement_path
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'st') AS t (n int, statement_id text, number text,
		bill_period_from_date date, bill_period_to_date date, issued_date date, gross_amount bigint, statement_path text)
	JOIN acc ON {{.SameAccount "acc.x = s.x"}}
	ORDER BY s.x, t.n),
{{.Notes}},
email AS (
	INSERT INTO email_outbox (account_id, customer_id, to_address, subject, body)
	SELECT acc.id, c.id, e.to_address, e.subject, e.body
	FROM docs s CROSS JOIN jsonb_to_recordset(s.doc->'em') AS e (c int, to_address text, subject text, body text)
	JOIN cust c ON {{.SameAccount "c.x = s.x"}} AND c.i = e.c JOIN acc ON {{.SameAccount "acc.x = s.x"}}
	ORDER BY s.x, e.c
	RETURNING id, account_id),
completed AS (
	UPDATE import_processes p SET status = '{{.Completed}}', service_account_number = acc.service_account_number,
		account_created_at = acc.created_at, last_error = NULL, updated_at = now()
	FROM acc WHERE p.id = acc.import_process_id)
SELECT {{if .Many}}x.x, {{end}}a.id AS account_id,
	x.contract IS NULL OR c.id IS NOT NULL AS contract_found,
	(SELECT g.tariff_code FROM agreement_in g
		WHERE {{.SameAccount "g.x = x.x"}} AND NOT EXISTS (SELECT 1 FROM tariffs t WHERE t.code = g.tariff_code)
		ORDER BY g.n LIMIT 1) AS missing_tariff,
	ARRAY(SELECT e.id FROM email e WHERE e.account_id = a.id ORDER BY e.id) AS outbox
FROM acc_in x LEFT JOIN acc a ON {{.SameAccount "a.x = x.x"}} LEFT JOIN contract c ON {{.SameAccount "c.x = x.x"}}
ORDER BY x.x
