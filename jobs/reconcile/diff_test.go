package reconcile

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Diff names each value that differs at its path in the canonical form,
// with both sides' JSON; a changed note stays one row at the cohort's index
// even when the change moves it in the canonical sort, and a transaction
// added or removed is that one transaction, named by its id.
func TestDiff_NamesEachDifferingValueAtItsPath(t *testing.T) {
	t.Parallel()
	str := func(s string) *string { return &s }
	base := func() Canonical {
		c := Canonical{ExternalAccountNumber: "A1",
			Notes: []CanonicalNote{{Body: "b note"}, {Body: "c note", IsPinned: true}},
			SupplyAddresses: []CanonicalSupply{{Postcode: "M1 1AA", SupplyPoints: []CanonicalPoint{{SupplyType: "ELECTRICITY",
				Fields: []CanonicalField{{"mpan", `"1200023456789"`}},
				Meters: []CanonicalMeter{{SerialNumber: str("SN-1")}, {SerialNumber: str("SN-2")}}}}}},
			Transactions: []CanonicalTx{{TransactionID: "T1", Amount: "1.50"}, {TransactionID: "T2", Amount: "2.00"}},
			Metadata:     []CanonicalField{{"tier", `"gold"`}},
		}
		c.sortLists()
		return c
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name   string
		change func(c *Canonical)
		want   []PathDifference
	}{
		{"nothing", func(*Canonical) {}, nil},
		{"a note's body, which moves it in the sort", func(c *Canonical) { c.Notes[0].Body = "z note"; c.sortLists() },
			[]PathDifference{{Path: "notes.0.body", Cohort: raw(`"b note"`), Service: raw(`"z note"`)}}},
		{"a meter's serial number", func(c *Canonical) { c.SupplyAddresses[0].SupplyPoints[0].Meters[1].SerialNumber = str("X") },
			[]PathDifference{{Path: "supply_addresses.0.supply_points.0.meters.1.serial_number", Cohort: raw(`"SN-2"`), Service: raw(`"X"`)}}},
		{"a meter's serial number removed", func(c *Canonical) { c.SupplyAddresses[0].SupplyPoints[0].Meters[0].SerialNumber = nil },
			[]PathDifference{{Path: "supply_addresses.0.supply_points.0.meters.0.serial_number", Cohort: raw(`"SN-1"`), Service: raw(`null`)}}},
		{"an amount", func(c *Canonical) { c.Transactions[1].Amount = "2.01" },
			[]PathDifference{{Path: "transactions[T2].amount", Cohort: raw(`"2.00"`), Service: raw(`"2.01"`)}}},
		{"a transaction removed", func(c *Canonical) { c.Transactions = c.Transactions[1:] },
			[]PathDifference{{Path: "transactions[T1]", Cohort: raw(`{"transaction_id":"T1","transaction_date":"","type":"","amount":"1.50","reason":null,"display_note":null,"note":null,"reference":null,"payment_type":null,"product_code":null,"to_prepay_meter_serial_number":null,"line_items":[],"tax_items":[]}`)}}},
		{"a metadata value", func(c *Canonical) { c.Metadata[0].Value = `"silver"` },
			[]PathDifference{{Path: "metadata[tier].value", Cohort: raw(`"\"gold\""`), Service: raw(`"\"silver\""`)}}},
		{"a supply point field", func(c *Canonical) { c.SupplyAddresses[0].SupplyPoints[0].Fields[0].Value = `"9"` },
			[]PathDifference{{Path: "supply_addresses.0.supply_points.0.fields[mpan].value", Cohort: raw(`"\"1200023456789\""`), Service: raw(`"\"9\""`)}}},
		{"a note added", func(c *Canonical) { c.Notes = append(c.Notes, CanonicalNote{Body: "a note"}); c.sortLists() },
			[]PathDifference{{Path: "notes.0", Service: raw(`{"body":"a note","is_pinned":false,"unpin_at":null,"document_paths":[]}`)}}},
		{"meters reordered", func(c *Canonical) {
			m := c.SupplyAddresses[0].SupplyPoints[0].Meters
			m[0], m[1] = m[1], m[0]
		}, []PathDifference{
			{Path: "supply_addresses.0.supply_points.0.meters.0.serial_number", Cohort: raw(`"SN-1"`), Service: raw(`"SN-2"`)},
			{Path: "supply_addresses.0.supply_points.0.meters.1.serial_number", Cohort: raw(`"SN-2"`), Service: raw(`"SN-1"`)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			service := base()
			tc.change(&service)
			if d := cmp.Diff(tc.want, Diff(base(), service)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}
