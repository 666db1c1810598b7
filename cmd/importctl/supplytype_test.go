package main

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/imports"
)

// The catalogue of supply types starts with the spec's five; the operator
// adds others, and E3 and E4 accept them at once, while a type nobody
// added (a typo) is refused with the reference's code.
func TestSupplyTypeCommands(t *testing.T) {
	t.Parallel()
	c := newCtl(t)
	var codes []string
	for _, st := range c.jsonList("supply-type", "list") {
		codes = append(codes, st["code"].(string))
	}
	if diff := cmp.Diff([]string{"ELECTRICITY", "HEAT_PUMP", "LIGHT", "POLE", "WATER_HEATER"}, codes); diff != "" {
		t.Errorf("the catalogue to start with (-want +got):\n%s", diff)
	}
	c.fails("already exists", "supply-type", "add", "ELECTRICITY")
	c.fails("blank", "supply-type", "add", " ")
	c.fails("at most 64 characters", "supply-type", "add", strings.Repeat("T", 65))

	c.ok("supplier", "create", "DEMO")
	c.ok("product", "create", "WATER", "--tariff", "WATER-STD") // every supply point has an agreement
	svc := imports.New(c.db())
	body := `{"import_supplier": "DEMO", "external_account_number": "A-1", "supply_addresses": [{"supply_address1": "1 Road",
		"supply_postcode": "M1 1AA", "customer_at_supply_address_from_date": "2024-01-01",
		"supply_points": [{"supply_type": "TREATED", "supply_start_date": "2024-01-01", "identifier": "WATER:1",
			"agreements": [{"tariff_code": "WATER-STD", "effective_from": "2024-01-01"}]}]}]}`
	_, err := svc.Validate(context.Background(), []byte(body), nil)
	if err == nil || !strings.Contains(err.Error(), "account_failed_validation") {
		t.Fatalf("a supply type nobody added: %v", err)
	}
	c.ok("supply-type", "add", "TREATED")
	if _, err := svc.Validate(context.Background(), []byte(body), nil); err != nil {
		t.Errorf("TREATED once added: %v", err)
	}
	if table := c.ok("supply-type", "list"); !strings.Contains(table, "SUPPLY TYPE") || !strings.Contains(table, "TREATED") {
		t.Errorf("table output: %q", table)
	}
}
