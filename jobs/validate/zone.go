package validate

import (
	"sync"
	"time"
)

// locations holds each time zone DateIn has loaded: time.LoadLocation
// reads the zone database on every call, and "today" is dated for every
// account and request.
var locations sync.Map // zone name -> *time.Location

// DateIn returns the date of t in the IANA time zone zone: the one home of
// "today in the supplier's time zone", which account validation (E3 to E5)
// and E7 and E8 use. "" or a zone that does not load dates it in UTC
// (importctl refuses such a zone when the operator sets it).
func DateIn(t time.Time, zone string) Date {
	if zone == "" || zone == "UTC" {
		return DateOf(t.UTC())
	}
	if loc, ok := locations.Load(zone); ok {
		return DateOf(t.In(loc.(*time.Location)))
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		loc = time.UTC
	}
	locations.Store(zone, loc)
	return DateOf(t.In(loc))
}
