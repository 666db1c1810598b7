package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/bulkimport/bulkimport/jobs/admin"
)

// dayOneStep is one command of the README's "Day one" block: the name and
// status its comment gives, and the shell text.
type dayOneStep struct {
	Name   string
	Status int
	Script string
}

var dayOneComment = regexp.MustCompile(`^# ([A-Za-z0-9]+): .*?: ([1-5][0-9]{2})\b`)

// dayOneSteps parses the ```sh day-one fenced block of a README: steps are
// separated by blank lines, and each starts with a comment "# NAME: what it
// does: STATUS". The lines before the first comment (if any) belong to the
// first step.
func dayOneSteps(readme string) ([]dayOneStep, error) {
	const open = "```sh day-one\n"
	i := strings.Index(readme, open)
	if i < 0 {
		return nil, fmt.Errorf("no %q block", strings.TrimSpace(open))
	}
	block := readme[i+len(open):]
	j := strings.Index(block, "\n```")
	if j < 0 {
		return nil, fmt.Errorf("the day-one block is not closed")
	}
	var steps []dayOneStep
	for chunk := range strings.SplitSeq(block[:j+1], "\n\n") {
		chunk = strings.TrimSpace(chunk)
		if chunk == "" {
			continue
		}
		first, _, _ := strings.Cut(chunk, "\n")
		m := dayOneComment.FindStringSubmatch(first)
		if m == nil {
			return nil, fmt.Errorf("step %q does not start with \"# NAME: what: STATUS\"", first)
		}
		status, _ := strconv.Atoi(m[2])
		steps = append(steps, dayOneStep{Name: m[1], Status: status, Script: chunk})
	}
	return steps, nil
}

func readDayOne(t *testing.T) []dayOneStep {
	t.Helper()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := dayOneSteps(string(raw))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	return steps
}

// The Day one block shows every endpoint once, in the order a newcomer meets
// them in a migration: the token first, then the account's life, then
// businesses and lists.
func TestReadme_DayOneCoversEveryEndpointInOrder(t *testing.T) {
	t.Parallel()
	var got []string
	for _, s := range readDayOne(t) {
		got = append(got, s.Name)
	}
	want := []string{"token", "E3", "E4", "E5", "E10", "E6", "E7", "E8", "E9", "E1", "E2", "E11", "E12", "E13"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("README Day one steps (-want +got):\n%s", d)
	}
}

func FuzzDayOneSteps(f *testing.F) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(raw))
	f.Add("```sh day-one\n# a: b: 200\nx\n```")
	f.Add("```sh day-one\n\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		steps, err := dayOneSteps(s)
		if err != nil {
			return
		}
		for _, st := range steps {
			if st.Name == "" || st.Status < 100 || st.Status > 599 || st.Script == "" {
				t.Errorf("step %+v", st)
			}
		}
	})
}

// buildImportctl builds cmd/importctl into a temporary directory.
func buildImportctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "importctl")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = "../importctl"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build importctl: %v\n%s", err, out)
	}
	return bin
}

var bannerKey = regexp.MustCompile(`(?m)^ API key +(\S+)$`)

// `make run`'s path, as a new user takes it: deploy/local/demo.sh provisions
// a fresh service and prints the banner, then the README's Day one block,
// pasted with the banner's address and key, takes the example account to
// COMPLETED, each command answering the status its comment gives. With the
// supplier's require-documents option on too: demo.sh uploads the welcome
// letter that the example account's note names.
func TestReadme_DayOneCommandsRunAgainstTheDemo(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds importctl and runs demo.sh twice; make test-long runs it")
	}
	for _, tool := range []string{"bash", "curl", "jq", "psql"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	steps := readDayOne(t)
	importctl := buildImportctl(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, requireDocuments := range []bool{false, true} {
		// One after the other, and with a long E5 wait: on a loaded
		// machine E5 of the example account can take more than the
		// default 30 s, and E2's vendor check more than its queue wait.
		t.Run(fmt.Sprintf("require-documents=%t", requireDocuments), func(t *testing.T) {
			s := startService(t, "serve", map[string]string{"PROCESS_WAIT_TIMEOUT": "2m"})
			u, _ := url.Parse(s.base)
			// psql (demo.sh writes the demo business with it) refuses
			// the test database's synchronous_commit parameter.
			dbURL, err := url.Parse(s.env["DATABASE_URL"])
			if err != nil {
				t.Fatal(err)
			}
			q := dbURL.Query()
			q.Del("synchronous_commit")
			dbURL.RawQuery = q.Encode()
			vendorAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
			env := []string{
				"PATH=" + os.Getenv("PATH"),
				"HOME=" + t.TempDir(),
				"DATABASE_URL=" + dbURL.String(),
				"DOCUMENTS_URL=" + s.env["DOCUMENTS_URL"],
				"HTTP_ADDR=" + u.Host,
				"VENDOR_SIM_ADDR=" + vendorAddr,
				"IMPORTCTL=" + importctl,
				"DEMO_KEY_FILE=" + filepath.Join(t.TempDir(), "demo_api_key"),
			}
			demo := exec.Command("deploy/local/demo.sh")
			demo.Dir, demo.Env = root, env
			var stderr bytes.Buffer
			demo.Stderr = &stderr
			banner, err := demo.Output()
			if err != nil {
				t.Fatalf("demo.sh: %v\n%s", err, stderr.String())
			}
			t.Logf("demo.sh:\n%s", stderr.String())
			m := bannerKey.FindSubmatch(banner)
			if m == nil {
				t.Fatalf("no API key in the banner:\n%s", banner)
			}
			if requireDocuments {
				on := exec.Command(importctl, "supplier", "set-option", "DEMO", "require-documents", "on")
				on.Env = env
				if out, err := on.CombinedOutput(); err != nil {
					t.Fatalf("set-option: %v\n%s", err, out)
				}
			}
			waitTCP(t, vendorAddr)

			// curl writes each answer's status to stderr, after a
			// marker per step, leaving stdout to the commands.
			var script strings.Builder
			script.WriteString("set -euo pipefail\ncurl() { command curl --write-out '%{stderr}@@status %{http_code}\\n' \"$@\"; }\n")
			for _, st := range steps {
				fmt.Fprintf(&script, "echo '@@step %s' >&2\n%s\necho >&2\n", st.Name, st.Script)
			}
			run := exec.Command("bash", "-c", script.String())
			run.Dir = root
			run.Env = append(slices.Clone(env), "BASE="+s.base, "KEY="+string(m[1]))
			var out, errOut bytes.Buffer
			run.Stdout, run.Stderr = &out, &errOut
			if err := run.Run(); err != nil {
				t.Fatalf("day-one block: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errOut.String())
			}
			got := map[string][]int{}
			step := ""
			sc := bufio.NewScanner(&errOut)
			for sc.Scan() {
				line := sc.Text()
				if name, ok := strings.CutPrefix(line, "@@step "); ok {
					step = name
					got[step] = []int{}
				} else if code, ok := strings.CutPrefix(line, "@@status "); ok {
					n, _ := strconv.Atoi(code)
					got[step] = append(got[step], n)
				}
			}
			want := map[string][]int{}
			for _, st := range steps {
				want[st.Name] = []int{st.Status}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("statuses per step (-want +got):\n%s\nkeys: %v\nstdout:\n%s", d, slices.Sorted(maps.Keys(got)), out.String())
			}
			tok := s.accessToken(t, s.newKey(t, "readme-check", "DEMO"))
			if st := s.status(t, tok, "A-00012345"); st["status"] != "COMPLETED" {
				t.Errorf("E10 of the example account: %v", st)
			}
		})
	}
}

// Pasted into a shell, the Day one block stops at its first refusal and
// shows it, instead of going on: a wrong key once made all fifteen calls
// answer "Invalid token.", each counted towards the failed-attempt limit. The
// block runs as pasted, without set -e; a curl shim counts the requests made.
func TestReadme_DayOneStopsAtTheFirstFailureWithItsReason(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed", tool)
		}
	}
	var block []string
	for _, st := range readDayOne(t) {
		block = append(block, st.Script)
	}
	s := startService(t, "api", nil)
	seedDemo(t, s, admin.Supplier{})
	if _, err := admin.CreateSupplier(context.Background(), s.db, admin.Supplier{Code: "OTHER"}); err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		Failed   bool
		Requests int
		Reason   bool
	}
	for _, c := range []struct {
		name, key, reason string
		requests          int
	}{
		{"a wrong key stops at the token, saying why", "bik_not-a-key", "Invalid API key.", 1},
		{"a key of another supplier stops at E3", s.newKey(t, "day-one-other", "OTHER"), `"import_supplier_not_found"`, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := filepath.Join(t.TempDir(), "calls")
			script := "curl() { echo >>\"$CALLS\"; command curl \"$@\"; }\n" + strings.Join(block, "\n\n") + "\n"
			run := exec.Command("bash", "-c", script)
			run.Dir = root
			run.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "BASE=" + s.base, "KEY=" + c.key, "CALLS=" + calls}
			out, err := run.CombinedOutput()
			raw, _ := os.ReadFile(calls)
			got := outcome{Failed: err != nil, Requests: strings.Count(string(raw), "\n"), Reason: strings.Contains(string(out), c.reason)}
			want := outcome{Failed: true, Requests: c.requests, Reason: true}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("the block (-want +got):\n%s\noutput:\n%s", d, out)
			}
		})
	}
}
