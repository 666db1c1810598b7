package auth

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/metrics"
)

// authFailures reads importd_auth_failures_total by "channel/reason".
func authFailures(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "importd_auth_failures_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range s.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out[l["channel"]+"/"+l["reason"]] = s.GetCounter().GetValue()
		}
	}
	return out
}

// Failed authentications were counted nowhere but in the 401 answers: the
// token endpoint's refusals (GraphQL answers them with status 200), the
// migration page's and the attempts that the failed-attempt limit refused
// went unseen, and ImportdFailedAuthSpike could not fire on them. Each is
// now counted once per attempt by channel, from zero; a missing credential
// and a right one are not failures.
func TestCountFailures_EveryChannelCountsWrongAndThrottledAttempts(t *testing.T) {
	t.Parallel()
	s, l, key := newLimitedService(t, 2)
	m := metrics.New()
	l.CountFailuresIn(m)
	ctx := context.Background()
	from := func(addr string) context.Context { return WithClientAddr(ctx, addr) }

	if diff := cmp.Diff(map[string]float64{
		"api/wrong": 0, "api/throttled": 0, "token/wrong": 0, "token/throttled": 0,
		"migration_page/wrong": 0, "migration_page/throttled": 0, "monitoring/wrong": 0, "monitoring/throttled": 0,
	}, authFailures(t, m)); diff != "" {
		t.Errorf("before any attempt (-want +got):\n%s", diff)
	}

	tok, err := s.TokenFromKey(from("198.51.100.1"), key)
	if err != nil {
		t.Fatal(err)
	}
	right := []func() error{
		func() error { _, err := s.AuthenticateHeader(from("198.51.100.1"), "Token "+tok.Token); return err },
		func() error { _, err := s.AuthenticateHeader(from("198.51.100.1"), "Token "+key); return err },
		func() error { _, err := s.AuthenticateHeader(from("198.51.100.1"), ""); return err },
		func() error {
			_, err := s.CheckLogin(from("198.51.100.1"), "ops:pw", func() bool { return true })
			return err
		},
	}
	for _, f := range right {
		_ = f()
	}
	// Each address below makes two wrong attempts, which the limit of 2
	// checks, then one that it refuses unchecked.
	page := WithChannel(from("198.51.100.4"), ChannelMigrationPage)
	attempts := []func(){
		func() { _, _ = s.AuthenticateHeader(from("198.51.100.2"), "Token abc.def.ghi") },
		func() { _, _ = s.TokenFromKey(from("198.51.100.3"), badKeyFor(key)) },
		func() { _, _ = s.AuthenticateKey(page, badKeyFor(key)) },
		func() { _, _ = s.CheckLogin(from("198.51.100.5"), "ops:nope", func() bool { return false }) },
	}
	for _, a := range attempts {
		for range 3 {
			a()
		}
	}
	_, _ = s.TokenFromRefresh(from("198.51.100.6"), "not a refresh token")
	_, _ = s.CheckLogin(WithChannel(from("198.51.100.7"), ChannelMigrationPage), "ops:nope", func() bool { return false })

	want := map[string]float64{
		"api/wrong": 2, "api/throttled": 1, "token/wrong": 3, "token/throttled": 1,
		"migration_page/wrong": 3, "migration_page/throttled": 1, "monitoring/wrong": 2, "monitoring/throttled": 1,
	}
	if diff := cmp.Diff(want, authFailures(t, m)); diff != "" {
		t.Errorf("failed authentications (-want +got):\n%s", diff)
	}
}
