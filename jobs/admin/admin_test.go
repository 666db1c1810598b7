package admin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/db/dbtest"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/status"
)

func TestCanonicalStatus_AcceptsAnyCase(t *testing.T) {
	t.Parallel()
	got := map[string]string{}
	for _, s := range []string{"ongoing", "PAUSED", "Complete", "cOmPlEtE", "done", ""} {
		got[s] = CanonicalStatus(s)
	}
	want := map[string]string{"ongoing": status.Ongoing, "PAUSED": status.Paused, "Complete": status.Complete,
		"cOmPlEtE": status.Complete, "done": "done", "": ""}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// A supplier's time zone is UTC unless the operator names one; a name that
// is no IANA zone is refused at time_zone, and a supplier that does not
// exist is reported as such.
func TestSupplierTimeZone_DefaultsToUTCAndRefusesWhatIsNoZone(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	s, err := CreateSupplier(ctx, d, Supplier{Code: "ZONES"})
	if err != nil {
		t.Fatal(err)
	}
	if s.TimeZone != "UTC" {
		t.Errorf("default time zone %q, want UTC", s.TimeZone)
	}
	if err := SetSupplierTimeZone(ctx, d, "ZONES", "Australia/Sydney"); err != nil {
		t.Fatal(err)
	}
	var stored string
	if err := d.Get(&stored, `SELECT time_zone FROM import_suppliers WHERE code = 'ZONES'`); err != nil || stored != "Australia/Sydney" {
		t.Errorf("stored %q (%v), want Australia/Sydney", stored, err)
	}
	for _, zone := range []string{"Mars/Olympus_Mons", "", "Local", "+05:00"} {
		err := SetSupplierTimeZone(ctx, d, "ZONES", zone)
		if p, ok := problem.As(err); !ok || p.Code != CodeInvalidTimeZone || p.Errors[0].Attr != "time_zone" {
			t.Errorf("time zone %q: %v, want %s at time_zone", zone, err, CodeInvalidTimeZone)
		}
	}
	if _, err := CreateSupplier(ctx, d, Supplier{Code: "BADZONE", TimeZone: "Nowhere/Land"}); err == nil {
		t.Error("a supplier created with no zone at all")
	}
	if p, ok := problem.As(SetSupplierTimeZone(ctx, d, "NOSUCH", "UTC")); !ok || p.Code != "import_supplier_not_found" {
		t.Errorf("a supplier that does not exist: %v", p)
	}
}
