package migrate_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// userHZ is the unit of the CPU times in /proc: USER_HZ, which Linux fixes
// at 100 for every interface it exports to user space.
const userHZ = 100

// cpuSample is the CPU time, in seconds, that the machine and each part of
// the pipeline had used at one moment, read from /proc.
type cpuSample struct {
	busy     float64 // the whole machine, every core: all but idle and iowait
	postgres float64 // the benchmark's PostgreSQL server, and its backends that exited
	importd  float64
	redis    float64
	runner   float64 // this process: the runner's client code
}

// servers names the processes a sample counts as PostgreSQL and Redis: the
// servers the benchmark runs against, so that other work on a shared machine
// (another cluster, other tests' backends) stays out of the figures. A zero
// pid counts every postmaster, or every redis-server, on the machine.
type servers struct {
	postmaster, redis int
}

// sampleCPU reads /proc. PostgreSQL's backends come and go with their
// connections: those alive are counted by their own times, and those that
// exited by the postmaster's times of its waited-for children (cutime,
// cstime), so that a delta between two samples counts both.
func sampleCPU(t testing.TB, importdPID int, srv servers) cpuSample {
	t.Helper()
	var s cpuSample
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	for i, v := range f[1:] {
		n, _ := strconv.ParseFloat(v, 64)
		if i != 3 && i != 4 && i < 8 { // leave out idle and iowait; guest is already in user
			s.busy += n / userHZ
		}
	}
	s.runner = procCPU(t, "self", false)
	s.importd = procCPU(t, strconv.Itoa(importdPID), false)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil {
			continue // exited meanwhile
		}
		pid := filepath.Base(d)
		n, _ := strconv.Atoi(pid)
		switch strings.TrimSpace(string(comm)) {
		case "postgres":
			// The postmaster is the postgres process whose parent is not
			// postgres: only it waits for the backends.
			parent := parentPID(pid)
			master := isPostmaster(pid)
			if srv.postmaster == 0 || n == srv.postmaster || parent == srv.postmaster {
				s.postgres += procCPU(t, pid, master)
			}
		case "redis-server":
			if srv.redis == 0 || n == srv.redis {
				s.redis += procCPU(t, pid, false)
			}
		}
	}
	return s
}

// serversOf finds the PostgreSQL and Redis servers that s runs against: the
// postmaster is the parent of a backend of its database, and Redis says its
// own process id.
func serversOf(t testing.TB, s *service) servers {
	t.Helper()
	var backend int
	if err := s.db.GetContext(context.Background(), &backend, `SELECT pg_backend_pid()`); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(s.redis)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	info, err := rdb.InfoMap(context.Background(), "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	rpid, err := strconv.Atoi(info["Server"]["process_id"])
	if err != nil {
		t.Fatalf("redis INFO server: process_id: %v", err)
	}
	return servers{postmaster: parentPID(strconv.Itoa(backend)), redis: rpid}
}

// parentPID is the parent of process pid (field 4 of its stat), 0 once it
// has exited.
func parentPID(pid string) int {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	n, _ := strconv.Atoi(f[1])
	return n
}

// procCPU is the user and system time of process pid, with that of its
// waited-for children when children is set; 0 once it has exited.
func procCPU(t testing.TB, pid string, children bool) float64 {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing parenthesis (field 3, state, comes first).
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	field := func(n int) float64 { // n as numbered in proc(5)
		v, _ := strconv.ParseFloat(f[n-3], 64)
		return v / userHZ
	}
	cpu := field(14) + field(15) // utime, stime
	if children {
		cpu += field(16) + field(17) // cutime, cstime
	}
	return cpu
}

func isPostmaster(pid string) bool {
	raw, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	comm, err := os.ReadFile(filepath.Join("/proc", f[1], "comm")) // field 4, ppid
	return err != nil || strings.TrimSpace(string(comm)) != "postgres"
}

// sub is the CPU used between earlier and s.
func (s cpuSample) sub(earlier cpuSample) cpuSample {
	return cpuSample{busy: s.busy - earlier.busy, postgres: s.postgres - earlier.postgres,
		importd: s.importd - earlier.importd, redis: s.redis - earlier.redis, runner: s.runner - earlier.runner}
}

// sampleCPU sees this process's own work in both its share and the
// machine's, and the servers the benchmark measures.
func TestSampleCPU_CountsTheRunnerWithinTheMachine(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc")
	}
	before := sampleCPU(t, os.Getpid(), servers{})
	x := 0
	for i := 0; procCPU(t, "self", false)-before.runner < 0.2; i++ {
		x += i % 7
	}
	used := sampleCPU(t, os.Getpid(), servers{}).sub(before)
	if used.runner < 0.2 {
		t.Errorf("runner used %.2f s, want at least the 0.2 s it spun", used.runner)
	}
	// The machine's time ticks apart from the process's, so allow a tick
	// or two of difference.
	if used.busy < used.runner-0.05 {
		t.Errorf("the machine was busy %.2f s, less than the runner's %.2f s", used.busy, used.runner)
	}
	if d := used.importd - used.runner; d < -0.02 || d > 0.02 { // read a moment apart
		t.Errorf("the process given as importd (this one) used %.2f s, the runner %.2f s", used.importd, used.runner)
	}
	if before.postgres <= 0 || before.redis <= 0 {
		t.Errorf("PostgreSQL %.2f s and Redis %.2f s so far: the servers the tests run against are not counted", before.postgres, before.redis)
	}
	_ = x
}

// serversOf names the servers a service runs against, and a sample scoped
// to them counts them, and nothing of another process.
func TestSampleCPU_CountsOnlyTheBenchmarksServers(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/stat"); err != nil {
		t.Skip("no /proc")
	}
	s := startService(t, nil)
	srv := serversOf(t, s)
	comm := func(pid int) string {
		raw, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		return strings.TrimSpace(string(raw))
	}
	if got := comm(srv.postmaster); got != "postgres" || !isPostmaster(strconv.Itoa(srv.postmaster)) {
		t.Errorf("postmaster %d is %q, not the postmaster", srv.postmaster, got)
	}
	if got := comm(srv.redis); got != "redis-server" {
		t.Errorf("redis %d is %q, not redis-server", srv.redis, got)
	}
	scoped := sampleCPU(t, os.Getpid(), srv)
	if scoped.postgres <= 0 || scoped.redis <= 0 {
		t.Errorf("PostgreSQL %.2f s and Redis %.2f s: the benchmark's servers are not counted", scoped.postgres, scoped.redis)
	}
	none := sampleCPU(t, os.Getpid(), servers{postmaster: os.Getpid(), redis: os.Getpid()})
	if none.postgres != 0 || none.redis != 0 {
		t.Errorf("scoped to this process, PostgreSQL %.2f s and Redis %.2f s were counted", none.postgres, none.redis)
	}
}
