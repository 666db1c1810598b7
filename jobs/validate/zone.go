package validate

import (
	"sync"
	"time"
)

// ZoneTTL is the longest a replica goes on dating "today" in a supplier's
// former time zone after the operator changes it: every cache that holds a
// supplier's zone (E3 and E4's catalogue, E7 and E8's zones) keeps it at
// most this long. It is the one bound the docs promise (importctl supplier
// set-time-zone, docs/decisions.md); a cache with its own, longer bound
// broke the promise for E3 and E4.
const ZoneTTL = 30 * time.Second

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
