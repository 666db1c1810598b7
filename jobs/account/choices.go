package account

// The spec lists the values "in use" of the coded fields (supply types,
// energization status, meter status, phase, register types, cover material,
// base, tank size and type). Those lists are examples, not the whole set, so
// the schema accepts any code matching ^[A-Z][A-Z0-9_]{0,63}$
// (validate.OpenCode) and refuses only what is not a code.

// The supply types with fields of their own (spec 2.2.4). Any other code is
// accepted too; such a supply point keeps its other fields as given.
const (
	SupplyElectricity = "ELECTRICITY"
	SupplyHeatPump    = "HEAT_PUMP"
	SupplyLight       = "LIGHT"
	SupplyPole        = "POLE"
	SupplyWaterHeater = "WATER_HEATER"
)
