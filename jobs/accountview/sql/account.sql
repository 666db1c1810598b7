WITH readings AS MATERIALIZED (
	SELECT tr.* FROM transfer_readings tr
	WHERE tr.supply_point_id IN (SELECT sp.id FROM supply_addresses sa JOIN supply_points sp ON sp.supply_address_id = sa.id
		WHERE sa.account_id = ANY($1)))
SELECT a.id, json_build_object(
	'service_account_number', a.service_account_number,
	'created_at', a.created_at,
	'operations_team', t.name,
	'unknown_occupier', a.unknown_occupier,
	'billing_address', json_build_object('street_address', a.billing_street_address,
		'locality', a.billing_locality, 'administrative_area', a.billing_administrative_area,
		'country', a.billing_country, 'postal_code', a.billing_postal_code),
	'last_billed_to_date', a.last_billed_to_date,
	'business', (SELECT json_build_object('external_business_identifier', b.external_business_identifier,
			'business_type', b.business_type, 'company_name', b.company_name, 'company_number', b.company_number,
			'business_contract_identifier', c.identifier, 'contract_valid_from_date', c.valid_from_date,
			'contract_signed_at_date', c.signed_at_date)
		FROM business_contracts c JOIN businesses b ON b.id = c.business_id WHERE c.id = a.business_contract_id),
	'customers', coalesce((SELECT json_agg(json_build_object('given_name', cu.given_name,
			'family_name', cu.family_name, 'email', cu.email, 'mobile', cu.mobile, 'landline', cu.landline,
			'alternative_phone_numbers', coalesce((SELECT json_agg(ph.phone_number ORDER BY ph.position)
				FROM customer_phone_numbers ph WHERE ph.customer_id = cu.id), '[]'),
			'date_of_birth', cu.date_of_birth, 'opted_into_updates', cu.opted_into_updates,
			'opted_into_offers', cu.opted_into_offers, 'opted_into_sms', cu.opted_into_sms,
			'user_details', coalesce((SELECT json_agg(json_build_object('namespace', ud.namespace, 'value', ud.value)
				ORDER BY ud.position) FROM customer_user_details ud WHERE ud.customer_id = cu.id), '[]'))
		ORDER BY cu.position) FROM customers cu WHERE cu.account_id = a.id), '[]'),
	'supply_addresses', coalesce((SELECT json_agg(json_build_object('supply_address1', sa.supply_address1,
			'supply_address2', sa.supply_address2, 'supply_address3', sa.supply_address3,
			'supply_address4', sa.supply_address4, 'supply_postcode', sa.supply_postcode,
			'customer_at_supply_address_from_date', sa.customer_at_supply_address_from_date,
			'supply_points', coalesce((SELECT json_agg(json_build_object('supply_type', sp.supply_type,
					'supply_start_date', sp.supply_start_date, 'last_billed_to_date', sp.last_billed_to_date,
					'fields', coalesce(sp.fields::json, (SELECT json_strip_nulls(json_build_object('identifier', x.identifier,
							'initial_connection_date', x.initial_connection_date,
							'location_description', x.location_description, 'book_number', x.book_number,
							'call_number', x.call_number, 'energization_status', x.energization_status))
						FROM electricity_supply_points x WHERE x.supply_point_id = sp.id),
						(SELECT json_strip_nulls(json_build_object('serial_number_internal', x.serial_number_internal,
							'serial_number_external', x.serial_number_external, 'make_model', x.make_model,
							'size', x.size, 'location_description', x.location_description,
							'product_note', x.product_note))
						FROM heat_pump_supply_points x WHERE x.supply_point_id = sp.id),
						(SELECT json_strip_nulls(json_build_object('serial_number', x.serial_number,
							'secondary_serial_number', x.secondary_serial_number,
							'manufacturer_name', x.manufacturer_name, 'model_name', x.model_name,
							'location', x.location, 'product_note', x.product_note, 'installed_at', x.installed_at))
						FROM light_pole_supply_points x WHERE x.supply_point_id = sp.id),
						(SELECT json_strip_nulls(json_build_object('serial_number', x.serial_number,
							'tank_size', x.tank_size, 'tank_type', x.tank_type,
							'tank_configuration', x.tank_configuration))
						FROM water_heater_supply_points x WHERE x.supply_point_id = sp.id),
						'{}'),
					'meters', coalesce((SELECT json_agg(json_build_object('serial_number', m.serial_number,
							'subgroup', m.subgroup, 'seal_date', m.seal_date, 'meter_number', m.meter_number,
							'status', m.status, 'active_from', m.active_from,
							'meter_type', json_strip_nulls(json_build_object('manufacturer', m.manufacturer,
								'model', m.model, 'amps_low', m.amps_low, 'amps_high', m.amps_high,
								'volts_low', m.volts_low, 'volts_high', m.volts_high, 'phase', m.phase,
								'elements', m.elements, 'stock_code', m.stock_code,
								'is_bidirectional', m.is_bidirectional, 'is_analog', m.is_analog,
								'cover_material', m.cover_material, 'wire_ports', m.wire_ports,
								'network_connectivity', m.network_connectivity, 'base', m.base)),
							'registers', coalesce((SELECT json_agg(json_build_object('register_type', r.register_type,
									'whole_digits', r.whole_digits, 'decimal_digits', r.decimal_digits,
									'active_from', r.active_from, 'multiplier', r.multiplier) ORDER BY r.id)
								FROM registers r WHERE r.meter_id = m.id), '[]'))
						ORDER BY m.id) FROM meters m
						WHERE m.account_id = a.id AND m.serial_number IS NOT NULL AND m.supply_point_id = sp.id), '[]'),
					'agreements', coalesce((SELECT json_agg(json_build_object('tariff_code', tf.code,
							'product_code', pr.code, 'effective_from', g.effective_from) ORDER BY g.effective_from)
						FROM agreements g JOIN tariffs tf ON tf.id = g.tariff_id JOIN products pr ON pr.id = tf.product_id
						WHERE g.supply_point_id = sp.id), '[]'),
					'transfer_readings', coalesce((SELECT json_agg(json_build_object('register_type', tr.register_type,
							'read_date', tr.read_date, 'value', tr.value) ORDER BY tr.id)
						FROM readings tr WHERE tr.supply_point_id = sp.id), '[]'))
				ORDER BY sp.position) FROM supply_points sp WHERE sp.supply_address_id = sa.id), '[]'))
		ORDER BY sa.position) FROM supply_addresses sa WHERE sa.account_id = a.id), '[]'),
	'metadata', coalesce((SELECT json_agg(json_build_object('key', md.key, 'value', md.value::json) ORDER BY md.key)
		FROM account_metadata md WHERE md.account_id = a.id), '[]'),
	'notes', coalesce((SELECT json_agg(json_build_object('body', n.body, 'created_at', n.created_at,
			'is_pinned', n.is_pinned, 'unpin_at', n.unpin_at,
			'document_paths', coalesce((SELECT json_agg(nd.document_path ORDER BY nd.position)
				FROM note_documents nd WHERE nd.note_id = n.id), '[]'))
		ORDER BY n.created_at, n.id) FROM notes n WHERE n.account_id = a.id), '[]'),
	'transactions', coalesce((SELECT json_agg(json_build_object('transaction_id', x.transaction_id,
			'transaction_date', x.transaction_date, 'original_transaction_date', x.original_transaction_date,
			'type', x.type, 'amount', x.amount, 'reason', x.reason, 'display_note', x.display_note, 'note', x.note,
			'reference', x.reference, 'payment_type', x.payment_type, 'product_code', pr.code,
			'description', x.description, 'to_prepay_meter_serial_number', x.to_prepay_meter_serial_number,
			'line_items', coalesce((SELECT json_agg(json_build_object('rate_band', li.rate_band,
					'start_date', li.start_date, 'end_date', li.end_date, 'number_of_units', li.number_of_units,
					'net_amount', li.net_amount, 'price_per_unit', li.price_per_unit, 'units', li.units)
				ORDER BY li.position) FROM transaction_line_items li WHERE li.transaction_row_id = x.id), '[]'),
			'tax_items', coalesce((SELECT json_agg(json_build_object('amount', ti.amount, 'tax_type', ti.tax_type,
					'value_taxed', ti.value_taxed, 'rate', ti.rate, 'unit_type', ti.unit_type)
				ORDER BY ti.position) FROM transaction_tax_items ti WHERE ti.transaction_row_id = x.id), '[]'))
		ORDER BY x.transaction_date, x.id)
		FROM transactions x LEFT JOIN products pr ON pr.id = x.product_id WHERE x.account_id = a.id), '[]'),
	'statements', coalesce((SELECT json_agg(json_build_object('statement_id', h.statement_id, 'number', h.number,
			'bill_period_from_date', h.bill_period_from_date, 'bill_period_to_date', h.bill_period_to_date,
			'issued_date', h.issued_date, 'gross_amount', h.gross_amount, 'statement_path', h.statement_path)
		ORDER BY h.bill_period_from_date, h.bill_period_to_date, h.id)
		FROM historical_statements h WHERE h.account_id = a.id), '[]'),
	'payment_instructions', coalesce((SELECT json_agg(json_build_object(
			'for', CASE WHEN pi.account_id IS NOT NULL THEN 'account' ELSE 'business' END,
			'external_business_identifier', b.external_business_identifier, 'vendor', v.name,
			'reference', pi.reference, 'type', pi.type, 'vendor_status', pi.vendor_status,
			'vendor_details', pi.vendor_details::json, 'verified_at', pi.verified_at) ORDER BY pi.id)
		FROM (SELECT p.id FROM payment_instructions p WHERE p.account_id = a.id
			UNION SELECT pa.instruction_id FROM payment_instruction_accounts pa WHERE pa.account_id = a.id) AS ids
		JOIN payment_instructions pi ON pi.id = ids.id JOIN payment_vendors v ON v.id = pi.vendor_id
		LEFT JOIN businesses b ON b.id = pi.business_id), '[]'),
	'ledger', (SELECT json_build_object('currency', l.currency, 'balance', l.balance,
			'last_statement_closing_date', l.last_statement_closing_date, 'last_statement_issue_date', l.last_statement_issue_date,
			'last_statement_balance', l.last_statement_balance)
		FROM ledgers l WHERE l.account_id = a.id))
FROM accounts a JOIN operations_teams t ON t.id = a.operations_team_id
WHERE a.id = ANY($1)
