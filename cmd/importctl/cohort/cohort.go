// Package cohort is the input of a migration run: a file of NDJSON lines, one
// account a line, plain or gzip-compressed. Each line holds the account's
// staging payload (E4) and, optionally, what is imported onto the account
// once it exists: notes (E6), transactions (E7), historical statements (E8)
// and a payment instruction (E9).
//
// The payload sits under "account" rather than at the top of the line
// because the E4 payload has fields of its own named notes and statements
// (created with the account), which are not the E6 notes and E8 statements.
package cohort

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// Line is one account of a cohort. The raw JSON of each part is sent to the
// service as it is; the runner reads nothing else from it.
type Line struct {
	// Account is the E4 payload (spec 2.2), required.
	Account json.RawMessage `json:"account"`
	// Notes, Transactions and Statements are the arrays of E6, E7 and E8.
	Notes        json.RawMessage `json:"notes,omitempty"`
	Transactions json.RawMessage `json:"transactions,omitempty"`
	Statements   json.RawMessage `json:"statements,omitempty"`
	// PaymentInstruction is {vendor, reference, type} of E9.
	PaymentInstruction json.RawMessage `json:"payment_instruction,omitempty"`
}

// Record is a parsed line with its place in the file and the account's
// identity, read from the payload.
type Record struct {
	Line
	// Number is the line's number in the file, from 1.
	Number                int
	ImportSupplier        string
	ExternalAccountNumber string
}

// LineError is a malformed line: the run reports it and goes on.
type LineError struct {
	Number int
	Err    error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Number, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// Parse reads one line. It checks only what the runner needs: a JSON object
// whose only keys are Line's, an "account" object with non-blank
// import_supplier and external_account_number strings, and the extras of
// the right JSON kind. Everything else is the service's to judge.
func Parse(b []byte) (Record, error) {
	var r Record
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r.Line); err != nil {
		return Record{}, fmt.Errorf("not a cohort line: %w", err)
	}
	if dec.More() {
		return Record{}, errors.New("not a cohort line: more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Record{}, errors.New("not a cohort line: more than one JSON value")
	}
	if len(r.Account) == 0 || !isKind(r.Account, '{') {
		return Record{}, errors.New(`"account" must be an object (the E4 payload)`)
	}
	var id struct {
		ImportSupplier        any `json:"import_supplier"`
		ExternalAccountNumber any `json:"external_account_number"`
	}
	if err := json.Unmarshal(r.Account, &id); err != nil {
		return Record{}, fmt.Errorf(`"account": %w`, err)
	}
	sup, ok1 := id.ImportSupplier.(string)
	ean, ok2 := id.ExternalAccountNumber.(string)
	if !ok1 || !ok2 || len(bytes.TrimSpace([]byte(sup))) == 0 || len(bytes.TrimSpace([]byte(ean))) == 0 {
		return Record{}, errors.New(`"account" must have import_supplier and external_account_number strings`)
	}
	r.ImportSupplier, r.ExternalAccountNumber = sup, ean
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		kind byte
	}{{"notes", r.Notes, '['}, {"transactions", r.Transactions, '['}, {"statements", r.Statements, '['},
		{"payment_instruction", r.PaymentInstruction, '{'}} {
		if len(f.raw) > 0 && !isKind(f.raw, f.kind) {
			want := "an array"
			if f.kind == '{' {
				want = "an object"
			}
			return Record{}, fmt.Errorf("%q must be %s", f.name, want)
		}
	}
	return r, nil
}

// isKind reports whether raw (valid JSON) starts with the delimiter c.
func isKind(raw json.RawMessage, c byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == c
}

// Reader reads a cohort line by line, decompressing gzip when the input
// starts with gzip's magic bytes, whatever the file is called.
type Reader struct {
	br   *bufio.Reader
	gz   *gzip.Reader
	line int
}

// maxLine bounds one line, so that a file without newlines cannot take the
// memory; an account payload is far smaller.
const maxLine = 16 << 20

// NewReader returns a Reader of r.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, err
	}
	c := &Reader{br: br}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		c.gz = gz
		c.br = bufio.NewReaderSize(gz, 64<<10)
	}
	return c, nil
}

// Next returns the next account. A malformed line comes back as a
// *LineError, after which Next may be called again; blank lines are
// skipped; io.EOF ends the file. Other errors (a broken gzip stream, a read
// error) end the reading.
func (c *Reader) Next() (Record, error) {
	for {
		b, err := c.readLine()
		if err != nil && (err != io.EOF || len(b) == 0) {
			return Record{}, err
		}
		c.line++
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if len(b) > maxLine {
			return Record{}, &LineError{Number: c.line, Err: fmt.Errorf("longer than %d bytes", maxLine)}
		}
		r, perr := Parse(b)
		if perr != nil {
			return Record{}, &LineError{Number: c.line, Err: perr}
		}
		r.Number = c.line
		return r, nil
	}
}

// NextRaw returns the next non-blank line as it is in the file, without
// its newline, and its number, for a reader that parses lines later or
// elsewhere (importctl reconcile sorts them first). A line longer than the
// limit comes back as a *LineError; io.EOF ends the file.
func (c *Reader) NextRaw() ([]byte, int, error) {
	for {
		b, err := c.readLine()
		if err != nil && (err != io.EOF || len(b) == 0) {
			return nil, 0, err
		}
		c.line++
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if len(b) > maxLine {
			return nil, 0, &LineError{Number: c.line, Err: fmt.Errorf("longer than %d bytes", maxLine)}
		}
		return b, c.line, nil
	}
}

// readLine returns the next line without its newline; a line over maxLine
// is read to its end but only its first maxLine+1 bytes kept.
func (c *Reader) readLine() ([]byte, error) {
	var out []byte
	for {
		frag, err := c.br.ReadSlice('\n')
		if len(out) <= maxLine {
			out = append(out, frag...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == nil {
			out = bytes.TrimSuffix(out, []byte("\n"))
		}
		return out, err
	}
}

// Close releases the gzip reader.
func (c *Reader) Close() error {
	if c.gz != nil {
		return c.gz.Close()
	}
	return nil
}

// Open opens a cohort file; "-" is standard input.
func Open(path string) (*Reader, io.Closer, error) {
	var f *os.File
	if path == "-" {
		f = os.Stdin
	} else {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, nil, err
		}
	}
	r, err := NewReader(f)
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, closers{r, f}, nil
}

type closers []io.Closer

func (cs closers) Close() error {
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Count returns the number of non-blank lines of the cohort file, for the
// progress display's total. It reads the file once, decompressing it.
func Count(path string) (int, error) {
	if path == "-" {
		return 0, nil
	}
	r, c, err := Open(path)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	n := 0
	for {
		b, err := r.readLine()
		if len(bytes.TrimSpace(b)) > 0 {
			n++
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
