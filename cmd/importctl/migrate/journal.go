package migrate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// journal records the steps a run finished, one JSON line each, appended
// and fsync'ed, so that a run stopped at any point (even by kill -9) can be
// taken up again. It is a hint, not the truth: a step done by the service
// but not yet written is simply made again, and the service's idempotency
// answers the repeat (see succeeded).
type journal struct {
	f    *os.File
	done map[string]map[Step]bool // account key -> finished steps

	mu      sync.Mutex
	pending [][]byte
	wake    chan struct{}
	closed  chan struct{}
	err     error
	quit    bool
}

type journalEntry struct {
	At      time.Time `json:"at"`
	Line    int       `json:"line"`
	Account string    `json:"account"` // import_supplier/external_account_number
	Step    Step      `json:"step"`
	// ServiceAccountNumber is set by E5.
	ServiceAccountNumber string `json:"service_account_number,omitempty"`
}

func accountKey(supplier, ean string) string { return supplier + "/" + ean }

// openJournal reads the journal at path (creating it), and returns it ready
// to append. Lines that do not parse are ignored: only the last one can be
// torn, by a kill during its write.
func openJournal(path string) (*journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	j := &journal{f: f, done: map[string]map[Step]bool{}, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	br := bufio.NewReader(f)
	var last byte = '\n'
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			last = line[len(line)-1]
			var e journalEntry
			if json.Unmarshal(bytes.TrimSpace(line), &e) == nil && e.Account != "" && e.Step != "" {
				if j.done[e.Account] == nil {
					j.done[e.Account] = map[Step]bool{}
				}
				j.done[e.Account][e.Step] = true
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	if last != '\n' {
		// End the torn line, so that the next entry starts on its own.
		if _, err := f.Write([]byte("\n")); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: %w", err)
		}
	}
	go j.writer()
	return j, nil
}

// finished reports whether the journal has the step of the account.
func (j *journal) finished(key string, s Step) bool { return j.done[key][s] }

// has reports whether an earlier run finished any step of the account.
func (j *journal) has(key string) bool { return len(j.done[key]) > 0 }

// record appends an entry. It does not wait for the disk: a writer
// goroutine writes what has gathered and syncs once for all of it.
func (j *journal) record(e journalEntry) {
	e.At = time.Now().UTC().Truncate(time.Millisecond)
	b, _ := json.Marshal(e)
	b = append(b, '\n')
	j.mu.Lock()
	j.pending = append(j.pending, b)
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

func (j *journal) writer() {
	defer close(j.closed)
	for {
		<-j.wake
		j.mu.Lock()
		batch, quit := j.pending, j.quit
		j.pending = nil
		j.mu.Unlock()
		if len(batch) > 0 {
			var buf bytes.Buffer
			for _, b := range batch {
				buf.Write(b)
			}
			_, err := j.f.Write(buf.Bytes())
			if err == nil {
				err = j.f.Sync()
			}
			if err != nil {
				j.mu.Lock()
				if j.err == nil {
					j.err = err
				}
				j.mu.Unlock()
			}
		}
		if quit {
			return
		}
	}
}

// close writes what is pending and closes the file.
func (j *journal) close() error {
	j.mu.Lock()
	j.quit = true
	j.mu.Unlock()
	select {
	case j.wake <- struct{}{}:
	default:
	}
	<-j.closed
	cerr := j.f.Close()
	if j.err != nil {
		return fmt.Errorf("journal: %w", j.err)
	}
	return cerr
}
