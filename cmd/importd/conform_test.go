package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// TestConform_DayNightMeterAndReadingsWithLeadingZerosAreCreated: a meter
// with two KWH_IMPORT registers (a day/night meter) and transfer readings
// in the forms the reference's pattern allows go through E4 and E5, and
// are stored as sent.
func TestConform_DayNightMeterAndReadingsWithLeadingZerosAreCreated(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	body := fixture(t, "ACC-DAYNIGHT")
	delete(body, "notes") // their document needs a store; not the subject here
	const elec = "supply_addresses.0.supply_points.0."
	edit(t, body, elec+"meters.0.registers.1.register_type", "KWH_IMPORT")
	edit(t, body, elec+"transfer_readings", []any{
		map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-05-31", "value": "00512.5"},
		map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-05-31", "value": ".5"},
	})
	s.stage(t, tok, body)
	r := s.do(t, "POST", processPath, tok, processBody("ACC-DAYNIGHT", false))
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	var registers, readings []string
	if err := s.db.Select(&registers, `SELECT r.register_type FROM registers r JOIN meters m ON m.id = r.meter_id
		JOIN accounts a ON a.id = m.account_id WHERE a.service_account_number = $1 AND m.serial_number = 'E21Z012345' ORDER BY r.id`,
		r.Body["service_account_number"]); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Select(&readings, `SELECT tr.value FROM transfer_readings tr JOIN meters m ON m.supply_point_id = tr.supply_point_id
		JOIN accounts a ON a.id = m.account_id WHERE a.service_account_number = $1 AND m.serial_number = 'E21Z012345' ORDER BY tr.id`,
		r.Body["service_account_number"]); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"KWH_IMPORT", "KWH_IMPORT"}, registers); diff != "" {
		t.Errorf("registers of the day/night meter (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"00512.5", ".5"}, readings); diff != "" {
		t.Errorf("transfer readings (-want +got):\n%s", diff)
	}
}

// TestConform_CodesOfAnyFormAreCreated: open codes keep only a length
// limit, so an account with a lower-case supply type and a phase that
// starts with a digit goes through E4 and E5 and is stored as sent.
func TestConform_CodesOfAnyFormAreCreated(t *testing.T) {
	t.Parallel()
	s := startService(t, "serve", nil)
	seedDemo(t, s, admin.Supplier{})
	tok := s.accessToken(t, s.newKey(t, "k"))
	body := fixture(t, "ACC-CODES")
	delete(body, "notes") // their document needs a store; not the subject here
	edit(t, body, "supply_addresses.0.supply_points.0.meters.0.meter_type.phase", "3PH")
	edit(t, body, "supply_addresses.1.supply_points.1.supply_type", "heat pump (air)")
	s.stage(t, tok, body)
	r := s.do(t, "POST", processPath, tok, processBody("ACC-CODES", false))
	if r.Status != 201 {
		t.Fatalf("E5: %d %s", r.Status, r.Raw)
	}
	var got []string
	if err := s.db.Select(&got, `SELECT m.phase FROM meters m JOIN accounts a ON a.id = m.account_id
		WHERE a.service_account_number = $1 AND m.serial_number = 'E21Z012345'
		UNION ALL SELECT sp.supply_type FROM supply_points sp JOIN accounts a ON a.id = sp.account_id
		WHERE a.service_account_number = $1 AND sp.supply_type NOT IN ('ELECTRICITY', 'WATER_HEATER')`, r.Body["service_account_number"]); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"3PH", "heat pump (air)"}, got); diff != "" {
		t.Errorf("stored codes (-want +got):\n%s", diff)
	}
}
