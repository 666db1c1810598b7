package reconcile

import (
	"bufio"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/bulkimport/bulkimport/cmd/importctl/cohort"
)

// entry is one cohort line on its way through the sort: its account's
// external number, its line number, and the line as read.
type entry struct {
	ext  string
	num  int
	line []byte
}

func compareEntries(a, b entry) int {
	if c := strings.Compare(a.ext, b.ext); c != 0 {
		return c
	}
	return a.num - b.num
}

// sorter sorts a cohort by external account number (byte order, as the
// service streams its summaries) with bounded memory: lines are gathered
// into runs of at most chunkBytes, each run sorted and, when there is more
// than one, written to a temporary file; the runs are then merged. A cohort
// that fits in one run is never written out.
type sorter struct {
	dir        string
	chunkBytes int
	files      []*os.File
	mem        []entry
	// supplier is the first line's import supplier; lines of another are
	// refused.
	supplier string
}

// errOtherSupplier is a cohort with accounts of more than one supplier.
var errOtherSupplier = errors.New("the cohort has accounts of more than one import supplier; reconcile one supplier at a time")

// sortCohort reads the cohort at path and returns its sorted runs.
// malformed is called for each line that cannot be read.
func sortCohort(path, dir string, chunkBytes int, malformed func(*cohort.LineError)) (*sorter, error) {
	r, closer, err := cohort.Open(path)
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	s := &sorter{dir: dir, chunkBytes: chunkBytes}
	var run []entry
	size := 0
	for {
		line, num, err := r.NextRaw()
		if err == io.EOF {
			break
		}
		var le *cohort.LineError
		if errors.As(err, &le) {
			malformed(le)
			continue
		}
		if err != nil {
			s.close()
			return nil, fmt.Errorf("cohort: %w", err)
		}
		// Only the account's identity is read here, in one pass: the line
		// is parsed in full later, by the workers that compute summaries.
		var id struct {
			Account struct {
				ImportSupplier        string `json:"import_supplier"`
				ExternalAccountNumber string `json:"external_account_number"`
			} `json:"account"`
		}
		if json.Unmarshal(line, &id) != nil || strings.TrimSpace(id.Account.ImportSupplier) == "" ||
			strings.TrimSpace(id.Account.ExternalAccountNumber) == "" {
			_, perr := cohort.Parse(line)
			if perr == nil {
				perr = errors.New(`"account" must have import_supplier and external_account_number strings`)
			}
			malformed(&cohort.LineError{Number: num, Err: perr})
			continue
		}
		sup, ext := id.Account.ImportSupplier, id.Account.ExternalAccountNumber
		if s.supplier == "" {
			s.supplier = sup
		} else if sup != s.supplier {
			s.close()
			return nil, fmt.Errorf("line %d: %w (%s and %s)", num, errOtherSupplier, s.supplier, sup)
		}
		run = append(run, entry{ext: ext, num: num, line: line})
		size += len(line) + len(ext) + 64
		if size >= s.chunkBytes {
			if err := s.spill(run); err != nil {
				s.close()
				return nil, err
			}
			run, size = run[:0], 0
		}
	}
	slices.SortFunc(run, compareEntries)
	if len(s.files) == 0 {
		s.mem = run
		return s, nil
	}
	if len(run) > 0 {
		if err := s.spill(run); err != nil {
			s.close()
			return nil, err
		}
	}
	return s, nil
}

// spill writes a sorted run to a temporary file: per line, the line
// number, the external number as a JSON string and the line, tab-separated
// (the first two hold no tab; the line, the last field, holds no newline).
func (s *sorter) spill(run []entry) error {
	slices.SortFunc(run, compareEntries)
	f, err := os.CreateTemp(s.dir, "reconcile-run-*.tsv")
	if err != nil {
		return fmt.Errorf("sort: %w", err)
	}
	s.files = append(s.files, f)
	w := bufio.NewWriterSize(f, 256<<10)
	for _, e := range run {
		ext, _ := json.Marshal(e.ext)
		w.WriteString(strconv.Itoa(e.num))
		w.WriteByte('\t')
		w.Write(ext)
		w.WriteByte('\t')
		w.Write(e.line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("sort: %w", err)
	}
	_, err = f.Seek(0, io.SeekStart)
	return err
}

// close removes the temporary files.
func (s *sorter) close() {
	for _, f := range s.files {
		f.Close()
		os.Remove(f.Name())
	}
	s.files = nil
}

// iterator returns the entries in order.
func (s *sorter) iterator() (func() (entry, bool, error), error) {
	if len(s.files) == 0 {
		i := 0
		return func() (entry, bool, error) {
			if i >= len(s.mem) {
				return entry{}, false, nil
			}
			e := s.mem[i]
			s.mem[i] = entry{} // let the line go
			i++
			return e, true, nil
		}, nil
	}
	h := &runHeap{}
	for _, f := range s.files {
		rr := &runReader{br: bufio.NewReaderSize(f, 256<<10)}
		e, ok, err := rr.next()
		if err != nil {
			return nil, err
		}
		if ok {
			h.items = append(h.items, runItem{e, rr})
		}
	}
	heap.Init(h)
	return func() (entry, bool, error) {
		if h.Len() == 0 {
			return entry{}, false, nil
		}
		top := h.items[0]
		e, ok, err := top.r.next()
		if err != nil {
			return entry{}, false, err
		}
		if ok {
			h.items[0].e = e
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
		return top.e, true, nil
	}, nil
}

type runReader struct{ br *bufio.Reader }

func (r *runReader) next() (entry, bool, error) {
	b, err := r.br.ReadBytes('\n')
	if err == io.EOF && len(b) == 0 {
		return entry{}, false, nil
	}
	if err != nil && err != io.EOF {
		return entry{}, false, fmt.Errorf("sort: %w", err)
	}
	parts := strings.SplitN(strings.TrimSuffix(string(b), "\n"), "\t", 3)
	if len(parts) != 3 {
		return entry{}, false, errors.New("sort: corrupt run file")
	}
	var e entry
	if e.num, err = strconv.Atoi(parts[0]); err != nil {
		return entry{}, false, fmt.Errorf("sort: corrupt run file: %w", err)
	}
	if err := json.Unmarshal([]byte(parts[1]), &e.ext); err != nil {
		return entry{}, false, fmt.Errorf("sort: corrupt run file: %w", err)
	}
	e.line = []byte(parts[2])
	return e, true, nil
}

type runItem struct {
	e entry
	r *runReader
}

type runHeap struct{ items []runItem }

func (h *runHeap) Len() int           { return len(h.items) }
func (h *runHeap) Less(i, j int) bool { return compareEntries(h.items[i].e, h.items[j].e) < 0 }
func (h *runHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *runHeap) Push(x any)         { h.items = append(h.items, x.(runItem)) }
func (h *runHeap) Pop() any {
	x := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return x
}
