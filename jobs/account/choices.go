package account

// The closed value sets of the payload, all in one place.
//
// The spec lists the values "in use" for each of these fields, some with a
// single value shown. The sets below are the values in use plus their
// evident counterparts (DE_ENERGIZED beside ENERGIZED, THREE beside SINGLE).
// They are closed on purpose: the worker
// maps each value onto the platform's own enumerations, and a value it does
// not know would fail account creation long after the caller's validate
// call said "valid". Widening a set is a change to this file and RULES.md.

// The supply types (spec 2.2.4); each decides which supply point fields are
// accepted.
const (
	SupplyElectricity = "ELECTRICITY"
	SupplyHeatPump    = "HEAT_PUMP"
	SupplyLight       = "LIGHT"
	SupplyPole        = "POLE"
	SupplyWaterHeater = "WATER_HEATER"
)

var (
	energizationStatuses = []string{"ENERGIZED", "DE_ENERGIZED"}
	meterStatuses        = []string{"ACTIVE", "INACTIVE", "REMOVED"}
	phases               = []string{"SINGLE", "THREE"}
	registerTypes        = []string{"KWH_IMPORT", "KW_IMPORT", "KWH_EXPORT", "KVARH_IMPORT"}
	coverMaterials       = []string{"GLASS", "PLASTIC", "METAL"}
	meterBases           = []string{"SOCKET", "BOTTOM_CONNECTED"}
	tankSizes            = []string{"SMALL", "MEDIUM", "BIG"}
	tankTypes            = []string{"GREEN", "STANDARD"}
)
