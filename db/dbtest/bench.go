package dbtest

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Figures are what one concurrent benchmark of account creation measured
// (ReportLatency), for the next benchmark of the same run to compare with.
type Figures struct {
	Rate float64 // accounts/s
	P50  float64 // ms
}

// ReportRatio reports f's rate over base's as unit, when base measured one.
func (f Figures) ReportRatio(b *testing.B, base Figures, unit string) {
	if base.Rate > 0 {
		b.ReportMetric(f.Rate/base.Rate, unit)
	}
}

// RunConcurrently calls fn for every index below n from workers goroutines
// and returns each call's latency. The first error fails the benchmark.
func RunConcurrently(b *testing.B, workers, n int, fn func(i int) error) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				start := time.Now()
				if err := fn(i); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	return lat
}

// ReportLatency reports the rate of a run that RunConcurrently timed, in
// accounts/s, and its p50 and p99 in ms, and returns the rate and p50.
func ReportLatency(b *testing.B, lat []time.Duration) Figures {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	f := Figures{Rate: float64(len(lat)) / b.Elapsed().Seconds(), P50: q(0.50)}
	b.ReportMetric(f.Rate, "accounts/s")
	b.ReportMetric(f.P50, "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op") // the per-op time of a concurrent run says nothing
	return f
}

// EnvInt reads the environment variable name as one positive integer, or
// returns def when it is unset: the benchmarks' settings (E5_WRITERS, ...).
func EnvInt(b *testing.B, name string, def int) int {
	n := EnvInts(b, name, def)
	if len(n) != 1 {
		b.Fatalf("%s: want one number, got %v", name, n)
	}
	return n[0]
}

// EnvInts reads the environment variable name as comma-separated positive
// integers, or returns def when it is unset.
func EnvInts(b *testing.B, name string, def ...int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want positive integers separated by commas", name, v)
		}
		out = append(out, n)
	}
	return out
}
