package account

// The spec lists the values "in use" of the coded fields (supply types,
// energization status, meter status, phase, register types, cover material,
// base, tank size and type). Those lists are examples, not the whole set, so
// the schema accepts any code of at most 64 characters (validate.OpenCode):
// no source fixes their form.

// The supply types with fields of their own (spec 2.2.4). Any other code is
// accepted too; such a supply point keeps its other fields as given.
const (
	SupplyElectricity = "ELECTRICITY"
	SupplyHeatPump    = "HEAT_PUMP"
	SupplyLight       = "LIGHT"
	SupplyPole        = "POLE"
	SupplyWaterHeater = "WATER_HEATER"
)
