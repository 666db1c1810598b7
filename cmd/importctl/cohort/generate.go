package cohort

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Options says what Generate writes.
type Options struct {
	Accounts int
	Seed     uint64
	// InvalidRate is the share of accounts (0 to 1) made invalid, each with
	// one problem of a known kind (InvalidKinds, in turn).
	InvalidRate float64
	// Supplier is the import supplier of every account (default DEMO).
	Supplier string
	// BusinessContract is the contract that business accounts name (default
	// BC-2024-0042); "" with NoBusiness makes none.
	BusinessContract string
	NoBusiness       bool
	// Vendor and Reference are the payment instruction given to some
	// accounts (default DEMO_PAY and DEMO-CARD-0001, the demo's simulator);
	// NoPayments gives none.
	Vendor, Reference string
	NoPayments        bool
}

// Catalogue the generated accounts refer to: the demo's (deploy/local/demo.sh
// and the tests' seed) tariffs.
var Tariffs = []string{"E-1R-VAR-C", "E-1R-FIX-24M-C", "HP-STD", "WH-RENT-STD"}

// Expected is what the service must answer for an invalid account: E4's
// 400 account_failed_validation with one error item of this code and attr.
// Its JSON names are those of the runner's failure report, so that the two
// files compare field by field.
type Expected struct {
	Line                  int    `json:"line"`
	ExternalAccountNumber string `json:"external_account_number"`
	Kind                  string `json:"kind"`
	Code                  string `json:"code"`
	Attr                  string `json:"attr"`
}

// InvalidKind is one way the generator spoils an account.
type InvalidKind struct {
	Name       string
	Code, Attr string
	spoil      func(acc map[string]any)
}

// InvalidKinds are the problems the generator gives invalid accounts, with
// the code and attr that jobs/account's validator answers for each (a test
// runs each through the validator).
var InvalidKinds = []InvalidKind{
	{"bad-landline", "invalid_phone_number", "customers.0.landline", func(a map[string]any) {
		customer0(a)["landline"] = "12345"
	}},
	{"bad-postcode", "invalid_postcode", "billing_address.postal_code", func(a map[string]any) {
		a["billing_address"].(map[string]any)["postal_code"] = "NOT A POSTCODE"
	}},
	{"unknown-tariff", "tariff_code_not_found", "supply_addresses.0.supply_points.0.agreements.0.tariff_code", func(a map[string]any) {
		sp := a["supply_addresses"].([]any)[0].(map[string]any)["supply_points"].([]any)[0].(map[string]any)
		sp["agreements"].([]any)[0].(map[string]any)["tariff_code"] = "NO-SUCH-TARIFF"
	}},
	{"bad-birth-date", "invalid_date", "customers.0.date_of_birth", func(a map[string]any) {
		customer0(a)["date_of_birth"] = "1984-13-45"
	}},
	{"duplicate-metadata", "metadata_has_duplicate_keys", "metadata.1.key", func(a map[string]any) {
		a["metadata"] = []any{
			map[string]any{"key": "legacy_account_id", "value": map[string]any{"id": 1}},
			map[string]any{"key": "legacy_account_id", "value": map[string]any{"id": 2}},
		}
	}},
}

func customer0(a map[string]any) map[string]any { return a["customers"].([]any)[0].(map[string]any) }

// Generate writes opts.Accounts cohort lines to w and returns the invalid
// accounts with what the service must answer for each. The same options
// give the same bytes.
func Generate(w io.Writer, opts Options) ([]Expected, error) {
	if opts.Accounts < 0 {
		return nil, errors.New("accounts must not be negative")
	}
	if opts.InvalidRate < 0 || opts.InvalidRate > 1 {
		return nil, errors.New("invalid rate must be between 0 and 1")
	}
	if opts.Supplier == "" {
		opts.Supplier = "DEMO"
	}
	if opts.BusinessContract == "" && !opts.NoBusiness {
		opts.BusinessContract = "BC-2024-0042"
	}
	if opts.Vendor == "" {
		opts.Vendor = "DEMO_PAY"
	}
	if opts.Reference == "" {
		opts.Reference = "DEMO-CARD-0001"
	}
	rng := newRand(opts.Seed)
	nInvalid := int(float64(opts.Accounts)*opts.InvalidRate + 0.5)
	invalid := map[int]int{} // account index -> kind index
	for k, i := range rng.Perm(opts.Accounts)[:nInvalid] {
		invalid[i] = k % len(InvalidKinds)
	}
	bw := bufio.NewWriter(w)
	var expected []Expected
	for i := range opts.Accounts {
		g := gen{rng: rng, opts: opts, i: i, ean: fmt.Sprintf("S%d-%07d", opts.Seed, i+1)}
		line := g.line()
		if k, ok := invalid[i]; ok {
			kind := InvalidKinds[k]
			kind.spoil(line["account"].(map[string]any))
			expected = append(expected, Expected{Line: i + 1, ExternalAccountNumber: g.ean, Kind: kind.Name, Code: kind.Code, Attr: kind.Attr})
		}
		b, err := json.Marshal(line)
		if err != nil {
			return nil, err
		}
		bw.Write(b)
		bw.WriteByte('\n')
	}
	return expected, bw.Flush()
}

func newRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// gen builds one account from the shared random source.
type gen struct {
	rng  *rand.Rand
	opts Options
	i    int
	ean  string
}

var (
	givenNames  = []string{"Amelia", "Oliver", "Isla", "George", "Ava", "Noah", "Mia", "Arthur", "Freya", "Leo", "Priya", "Tomasz", "Siobhan", "Kwame"}
	familyNames = []string{"Hughes", "Smith", "Patel", "Jones", "Williams", "Brown", "Taylor", "Davies", "Evans", "Kowalski", "O'Neill", "Mensah"}
	streets     = []string{"Albert Road", "Mill Lane", "Church Street", "Station Road", "Victoria Avenue", "High Street", "Park View"}
	towns       = []struct{ locality, area, postcode string }{
		{"Manchester", "Greater Manchester", "M20 2GL"},
		{"Stockport", "Greater Manchester", "SK4 1AB"},
		{"Leeds", "West Yorkshire", "LS1 4DY"},
		{"Bristol", "City of Bristol", "BS1 5TR"},
		{"Cardiff", "South Glamorgan", "CF10 1EP"},
		{"Glasgow", "Lanarkshire", "G1 1XQ"},
		{"London", "Greater London", "SW1A 1AA"},
	}
	mobiles   = []string{"+44 7911 123456", "07911 123458", "+447911123457", "07911 123459"}
	landlines = []string{"0161 496 0123", "020 7946 0018", "0113 496 0555", "029 2018 0000"}
)

func (g *gen) pick(xs []string) string { return xs[g.rng.IntN(len(xs))] }

func (g *gen) line() map[string]any {
	acc := g.account()
	line := map[string]any{"account": acc}
	line["notes"] = []any{
		map[string]any{"body": fmt.Sprintf("Migrated from the legacy CRM, account %s.", g.ean), "created_at": "2025-06-02T09:00:00Z"},
	}
	if g.rng.IntN(3) == 0 {
		line["notes"] = append(line["notes"].([]any), map[string]any{
			"body": "Customer prefers contact by e-mail.", "created_at": "2025-06-03T10:15:00Z", "is_pinned": true, "unpin_at": "2026-01-01T00:00:00Z"})
	}
	line["transactions"] = g.transactions()
	line["statements"] = []any{map[string]any{
		"statement_id": g.ean + "-ST1", "number": fmt.Sprintf("%d", 100000+g.i),
		"bill_period_from_date": "2025-04-01", "bill_period_to_date": "2025-05-01", "issued_date": "2025-05-03",
		"gross_amount": 2000 + g.rng.IntN(20000),
	}}
	if !g.opts.NoPayments && g.rng.IntN(4) == 0 {
		line["payment_instruction"] = map[string]any{"vendor": g.opts.Vendor, "reference": g.opts.Reference, "type": "CARD"}
	}
	return line
}

func (g *gen) account() map[string]any {
	town := towns[g.rng.IntN(len(towns))]
	family := g.pick(familyNames)
	acc := map[string]any{
		"import_supplier":         g.opts.Supplier,
		"external_account_number": g.ean,
		"billing_address": map[string]any{
			"street_address":      fmt.Sprintf("%d %s", 1+g.rng.IntN(200), g.pick(streets)),
			"locality":            town.locality,
			"administrative_area": town.area,
			"country":             "GB",
			"postal_code":         town.postcode,
		},
		"metadata": []any{map[string]any{"key": "legacy_account_id", "value": map[string]any{"system": "legacy-crm", "id": 100000 + g.i}}},
		"ledgers":  []any{}, "statements": []any{},
		"unknown_occupier": false,
	}
	customers := []any{g.customer(family, true)}
	if g.rng.IntN(3) == 0 {
		customers = append(customers, g.customer(family, false))
	}
	acc["customers"] = customers
	addrs := []any{g.supplyAddress(town.postcode, 0)}
	if g.rng.IntN(5) == 0 {
		addrs = append(addrs, g.supplyAddress(town.postcode, 1))
	}
	acc["supply_addresses"] = addrs
	if g.rng.IntN(2) == 0 {
		acc["notes"] = []any{map[string]any{"body": "Account created by the migration.", "created_at": "2025-06-01T08:00:00Z"}}
	}
	if !g.opts.NoBusiness && g.rng.IntN(10) == 0 {
		acc["business"] = map[string]any{"business_contract_identifier": g.opts.BusinessContract}
	}
	return acc
}

func (g *gen) customer(family string, first bool) map[string]any {
	given := g.pick(givenNames)
	c := map[string]any{
		"given_name": given, "family_name": family,
		"email":         fmt.Sprintf("%s.%s.%d@brightmail.co.uk", strings.ToLower(given), strings.ToLower(strings.ReplaceAll(family, "'", "")), g.i),
		"date_of_birth": fmt.Sprintf("%d-%02d-%02d", 1940+g.rng.IntN(60), 1+g.rng.IntN(12), 1+g.rng.IntN(28)),
		"customer_preferences": map[string]any{
			"opted_into_updates": g.rng.IntN(2) == 0, "opted_into_offers": g.rng.IntN(2) == 0, "opted_into_sms": g.rng.IntN(2) == 0},
	}
	switch g.rng.IntN(4) {
	case 0: // no phone at all
	case 1:
		c["mobile"] = g.pick(mobiles)
	case 2:
		c["landline"] = g.pick(landlines)
	default:
		c["mobile"], c["landline"] = g.pick(mobiles), ""
	}
	if first {
		// The invalid kinds spoil the first customer's landline and birth
		// date, so it always has the keys.
		if _, ok := c["landline"]; !ok {
			c["landline"] = ""
		}
	}
	return c
}

func (g *gen) supplyAddress(postcode string, n int) map[string]any {
	points := []any{g.electricity(n)}
	switch g.rng.IntN(4) {
	case 0:
		points = append(points, map[string]any{
			"supply_type": "HEAT_PUMP", "serial_number_internal": fmt.Sprintf("HP-INT-%s-%d", g.ean, n),
			"serial_number_external": fmt.Sprintf("HP-EXT-%s-%d", g.ean, n), "make_model": "Vaillant aroTHERM plus",
			"size": 5 + g.rng.IntN(8), "location_description": "Rear yard", "supply_start_date": "2023-03-01",
			"last_billed_to_date": "2025-05-31",
			"agreements":          []any{map[string]any{"tariff_code": "HP-STD", "effective_from": "2023-03-01"}},
		})
	case 1:
		points = append(points, map[string]any{
			"supply_type": "WATER_HEATER", "serial_number": fmt.Sprintf("WH-%s-%d", g.ean, n), "tank_size": "BIG",
			"tank_type": "GREEN", "tank_configuration": "Vertical, loft", "supply_start_date": "2021-09-01",
			"last_billed_to_date": "2025-05-31",
			"agreements":          []any{map[string]any{"tariff_code": "WH-RENT-STD", "effective_from": "2021-09-01"}},
		})
	}
	return map[string]any{
		"supply_address1": fmt.Sprintf("%d %s", 1+g.rng.IntN(200), g.pick(streets)),
		"supply_postcode": postcode, "customer_at_supply_address_from_date": "2019-04-01",
		"supply_points": points,
	}
}

func (g *gen) electricity(n int) map[string]any {
	agreements := []any{map[string]any{"tariff_code": "E-1R-VAR-C", "effective_from": "2019-04-01"}}
	if g.rng.IntN(2) == 0 {
		agreements = append(agreements, map[string]any{"tariff_code": "E-1R-FIX-24M-C", "effective_from": "2024-06-01"})
	}
	return map[string]any{
		"supply_type": "ELECTRICITY", "identifier": fmt.Sprintf("%013d", g.opts.Seed%1000*10_000_000_000+uint64(g.i)*10+uint64(n)),
		"supply_start_date": "2019-04-01", "last_billed_to_date": "2025-05-31", "energization_status": "ENERGIZED",
		"meters": []any{map[string]any{
			"serial_number": fmt.Sprintf("E%s-%d", g.ean, n), "status": "ACTIVE", "active_from": "2019-04-01",
			"registers": []any{map[string]any{"register_type": "KWH_IMPORT", "whole_digits": 6, "decimal_digits": 1, "multiplier": 1}},
		}},
		"transfer_readings": []any{map[string]any{"register_type": "KWH_IMPORT", "read_date": "2025-05-31",
			"value": fmt.Sprintf("%d.%d", 1000+g.rng.IntN(90000), g.rng.IntN(10))}},
		"agreements": agreements,
	}
}

// transactions are ten, dated after the accounts' last billed day
// (2025-05-31), so that they fall in the open statement period and none is
// moved (a moved transaction would add a pinned note).
func (g *gen) transactions() []any {
	out := make([]any, 10)
	for k := range out {
		date := fmt.Sprintf("2025-%02d-%02d", 6+k/2, 1+g.rng.IntN(28))
		amount := json.Number(fmt.Sprintf("%d.%02d", 5+g.rng.IntN(200), g.rng.IntN(100)))
		id := fmt.Sprintf("%s-T%02d", g.ean, k+1)
		var t map[string]any
		switch k % 4 {
		case 0, 2:
			t = map[string]any{"type": "CHARGE", "reason": "IMPORTED_CHARGE", "display_note": "Electricity charge", "note": "Imported"}
		case 1:
			t = map[string]any{"type": "PAYMENT", "reason": "ACCOUNT_CHARGE_PAYMENT", "reference": "DD-" + id, "payment_type": "DD_REGULAR_COLLECTION"}
		default:
			t = map[string]any{"type": "CREDIT", "reason": "GENERAL_CREDIT", "display_note": "Goodwill credit", "note": "Imported"}
		}
		t["transaction_id"], t["transaction_date"], t["amount"] = id, date, amount
		out[k] = t
	}
	return out
}
