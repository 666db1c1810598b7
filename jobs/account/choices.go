package account

// The spec lists the values "in use" of the coded fields (supply types,
// energization status, meter status, phase, register types, cover material,
// base, tank size and type). Those lists are examples, not the whole set, so
// the schema accepts any code of at most 64 characters (validate.OpenCode):
// no source fixes their form.

// The supply types with fields of their own (spec 2.2.4), which the
// catalogue of supply types holds from the start (migration 00026). The
// operator adds others (importctl supply-type add); a supply point of such
// a type keeps its other fields as given.
const (
	SupplyElectricity = "ELECTRICITY"
	SupplyHeatPump    = "HEAT_PUMP"
	SupplyLight       = "LIGHT"
	SupplyPole        = "POLE"
	SupplyWaterHeater = "WATER_HEATER"
)
