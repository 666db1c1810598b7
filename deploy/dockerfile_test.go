package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// readDockerfile splits ../Dockerfile into instructions and returns those of
// each stage, the first stage first. Comments and blank lines are dropped.
func readDockerfile(t *testing.T) [][]instruction {
	t.Helper()
	data, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var stages [][]instruction
	var cur strings.Builder
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(rest + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.Join(strings.Fields(args), " ")}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %s before the first FROM", in.cmd)
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: want a multi-stage build, found %d stage(s)", len(stages))
	}
	return stages
}

func find(stage []instruction, cmd string) []string {
	var out []string
	for _, in := range stage {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

func TestDockerfile_BuildsStaticBinaries(t *testing.T) {
	t.Parallel()
	build := readDockerfile(t)[0]
	if from := build[0].args; !strings.HasPrefix(from, "golang:1.26") {
		t.Errorf("Dockerfile: builder is %q, want golang:1.26 (go.mod's toolchain)", from)
	}
	all := strings.Join(slices.Concat(find(build, "ENV"), find(build, "RUN")), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags='-s -w'", "--mount=type=cache,target=/go/pkg/mod", "./cmd/importd", "./cmd/importctl"} {
		if !strings.Contains(all, want) {
			t.Errorf("Dockerfile: builder stage does not use %s", want)
		}
	}
}

func TestDockerfile_FinalImageRunsImportdAsNonRoot(t *testing.T) {
	t.Parallel()
	stages := readDockerfile(t)
	final := stages[len(stages)-1]
	from := final[0].args
	if !strings.Contains(from, "distroless/static") && from != "scratch" {
		t.Errorf("Dockerfile: final image is %q, want distroless static or scratch", from)
	}
	users := find(final, "USER")
	if len(users) == 0 {
		t.Fatal("Dockerfile: the final stage sets no USER, so it runs as root")
	}
	if u, _, _ := strings.Cut(users[len(users)-1], ":"); u == "root" || u == "0" {
		t.Errorf("Dockerfile: USER %q is root", users[len(users)-1])
	}
	copies := strings.Join(find(final, "COPY"), "\n")
	for _, bin := range []string{"/importd", "/importctl"} {
		if !strings.Contains(copies, " "+bin+"\n") && !strings.HasSuffix(copies, " "+bin) {
			t.Errorf("Dockerfile: the final image does not get %s", bin)
		}
	}
	if got := find(final, "ENTRYPOINT"); !slices.Equal(got, []string{`["/importd"]`}) {
		t.Errorf("Dockerfile: ENTRYPOINT = %q, want [\"/importd\"] (exec form, so that importd gets SIGTERM)", got)
	}
	if got := find(final, "EXPOSE"); !slices.Contains(got, "8080") {
		t.Errorf("Dockerfile: EXPOSE = %q, want 8080", got)
	}
}

func TestDockerignore_KeepsLocalStateOut(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for line := range strings.Lines(string(data)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.Trim(line, "/"))
		}
	}
	for _, want := range []string{".local", "bin", ".git"} {
		if !slices.Contains(patterns, want) {
			t.Errorf(".dockerignore does not exclude %s (have %q)", want, patterns)
		}
	}
}
