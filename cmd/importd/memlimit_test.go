package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// importd ran with no Go memory limit, so a burst of large requests grew
// its heap until the container was killed. With MEMORY_LIMIT (the
// container's limit, which deploy/k8s and docker-compose.yml pass) it sets
// the runtime's limit to 90% of it, unless GOMEMLIMIT set one already. Not
// parallel: it changes the test binary's own memory limit, and restores it.
func TestApplyMemoryLimit_NinetyPercentOfTheContainersUnlessOneIsSet(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })

	debug.SetMemoryLimit(math.MaxInt64) // none, as without GOMEMLIMIT
	if _, set := applyMemoryLimit(0); set || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Error("a limit was set without MEMORY_LIMIT")
	}
	got, set := applyMemoryLimit(512 << 20)
	if want := int64(512<<20) / 10 * 9; !set || got != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("MEMORY_LIMIT of 512 MiB: set %v to %d (runtime %d), want %d", set, got, debug.SetMemoryLimit(-1), want)
	}
	debug.SetMemoryLimit(300 << 20) // as GOMEMLIMIT=300MiB would
	if _, set := applyMemoryLimit(512 << 20); set || debug.SetMemoryLimit(-1) != 300<<20 {
		t.Error("MEMORY_LIMIT overrode GOMEMLIMIT")
	}
}

func TestConfig_MemoryLimitIsBytes(t *testing.T) {
	t.Parallel()
	for v, ok := range map[string]bool{"536870912": true, "512Mi": false, "1000": false, "-1": false} {
		_, err := loadConfig(func(k string) string { return map[string]string{"MEMORY_LIMIT": v}[k] }, 0)
		if (err == nil) != ok {
			t.Errorf("MEMORY_LIMIT=%s: %v", v, err)
		}
	}
}
