package payment

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Vendor defaults and limits. The timeout default is the one the
// payment-instruction requirements set; three attempts ride out a blip
// without keeping a caller waiting for minutes.
const (
	DefaultTimeout  = 5 * time.Second
	DefaultAttempts = 3
	DefaultBackoff  = 200 * time.Millisecond
	MaxTimeout      = 5 * time.Minute
	MaxAttempts     = 10
	MaxBackoff      = time.Minute
	// maxBackoffStep caps one wait between attempts, however many there are.
	maxBackoffStep = 30 * time.Second
)

var vendorNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Vendor is a payment vendor as the operator configured it.
type Vendor struct {
	ID   int64  `db:"id" json:"-"`
	Name string `db:"name" json:"name"`
	// Adapter names the code that talks to the vendor; AdapterHTTP is the
	// protocol of PROTOCOL.md.
	Adapter string `db:"adapter" json:"adapter"`
	// BaseURL is where the vendor's protocol is served, without a trailing
	// slash.
	BaseURL string `db:"base_url" json:"base_url"`
	// Timeout bounds one request to the vendor.
	Timeout time.Duration `db:"-" json:"-"`
	// Attempts is how many times an intermittent failure is tried in all.
	Attempts int `db:"attempts" json:"attempts"`
	// Backoff is the wait after the first failed attempt; it doubles after
	// each further one.
	Backoff time.Duration `db:"-" json:"-"`

	TimeoutMS int64     `db:"timeout_ms" json:"-"`
	BackoffMS int64     `db:"backoff_ms" json:"-"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// vendorJSON is how importctl --json shows a vendor: durations as text.
type vendorJSON struct {
	Name      string    `json:"name"`
	Adapter   string    `json:"adapter"`
	BaseURL   string    `json:"base_url"`
	Timeout   string    `json:"timeout"`
	Attempts  int       `json:"attempts"`
	Backoff   string    `json:"backoff"`
	CreatedAt time.Time `json:"created_at"`
}

// JSON returns the vendor as importctl shows it.
func (v Vendor) JSON() any {
	return vendorJSON{Name: v.Name, Adapter: v.Adapter, BaseURL: v.BaseURL, Timeout: v.Timeout.String(),
		Attempts: v.Attempts, Backoff: v.Backoff.String(), CreatedAt: v.CreatedAt}
}

func (v *Vendor) fromDB() {
	v.Timeout = time.Duration(v.TimeoutMS) * time.Millisecond
	v.Backoff = time.Duration(v.BackoffMS) * time.Millisecond
}

// BackoffBefore is the wait before attempt n (n >= 2): Backoff, then twice
// that, and so on, each wait at most 30 s.
func (v Vendor) BackoffBefore(n int) time.Duration {
	d := v.Backoff
	for i := 2; i < n && d < maxBackoffStep; i++ {
		d *= 2
	}
	return min(d, maxBackoffStep)
}

// Budget is the longest a verification against this vendor can take:
// every attempt timing out, with the waits between them.
func (v Vendor) Budget() time.Duration {
	total := time.Duration(v.Attempts) * v.Timeout
	for n := 2; n <= v.Attempts; n++ {
		total += v.BackoffBefore(n)
	}
	return total
}

// checkVendor validates v and fills in defaults. Every problem is reported.
func checkVendor(v *Vendor) error {
	if v.Adapter == "" {
		v.Adapter = AdapterHTTP
	}
	if v.Timeout == 0 {
		v.Timeout = DefaultTimeout
	}
	if v.Attempts == 0 {
		v.Attempts = DefaultAttempts
	}
	var errs problem.List
	if !vendorNameRE.MatchString(v.Name) {
		errs.Add("name", "invalid_vendor_name", "Vendor name %q must be 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit.", v.Name)
	}
	u, err := url.Parse(v.BaseURL)
	if err != nil || !AllowedURL(u) || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		errs.Add("url", "invalid_url", "Vendor URL %q must be an absolute https:// URL (http:// only for a loopback host: 127.0.0.0/8, ::1, localhost) without credentials, query or fragment.", v.BaseURL)
	} else {
		v.BaseURL = strings.TrimRight(v.BaseURL, "/")
	}
	if !slices.Contains(Adapters(), v.Adapter) {
		errs.Add("adapter", "invalid_choice", "Adapter %q is not one of %s.", v.Adapter, strings.Join(Adapters(), ", "))
	}
	if v.Timeout < time.Millisecond || v.Timeout > MaxTimeout {
		errs.Add("timeout", "invalid", "Timeout %s must be between 1ms and %s.", v.Timeout, MaxTimeout)
	}
	if v.Attempts < 1 || v.Attempts > MaxAttempts {
		errs.Add("attempts", "invalid", "Attempts %d must be between 1 and %d.", v.Attempts, MaxAttempts)
	}
	if v.Backoff < 0 || v.Backoff > MaxBackoff {
		errs.Add("backoff", "invalid", "Backoff %s must be between 0 and %s.", v.Backoff, MaxBackoff)
	}
	if len(errs) == 1 {
		e := errs[0]
		return problem.Invalidf(e.Code, e.Attr, "%s", e.Detail)
	}
	if err := errs.Err("invalid_vendor", "The vendor is not valid: "+joinDetails(errs)); err != nil {
		return err
	}
	return nil
}

func joinDetails(errs problem.List) string {
	d := make([]string, len(errs))
	for i, e := range errs {
		d[i] = e.Detail
	}
	return strings.Join(d, " ")
}

// AddVendor validates and stores a new vendor. A zero Adapter, Timeout or
// Attempts takes its default; a zero Backoff means no wait between attempts
// (importctl's --backoff defaults to DefaultBackoff). Errors: a
// *problem.Error (Invalid) for a bad field or a name in use.
func AddVendor(ctx context.Context, d *db.DB, v Vendor) (Vendor, error) {
	if err := checkVendor(&v); err != nil {
		return v, err
	}
	err := d.GetContext(ctx, &v, `INSERT INTO payment_vendors (name, adapter, base_url, timeout_ms, attempts, backoff_ms)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING *`,
		v.Name, v.Adapter, v.BaseURL, v.Timeout.Milliseconds(), v.Attempts, v.Backoff.Milliseconds())
	if db.IsUniqueViolation(err, "") {
		return v, problem.Invalidf("already_exists", "name", "Vendor %s already exists.", v.Name)
	}
	if err != nil {
		return v, fmt.Errorf("add vendor: %w", err)
	}
	v.fromDB()
	return v, nil
}

// ListVendors returns every vendor by name.
func ListVendors(ctx context.Context, d *db.DB) ([]Vendor, error) {
	out := []Vendor{}
	if err := d.SelectContext(ctx, &out, `SELECT * FROM payment_vendors ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list vendors: %w", err)
	}
	for i := range out {
		out[i].fromDB()
	}
	return out, nil
}

// vendorByID returns the vendor with this id, or db.ErrNotFound.
func vendorByID(ctx context.Context, d *db.DB, id int64) (Vendor, error) {
	var v Vendor
	err := d.GetContext(ctx, &v, `SELECT * FROM payment_vendors WHERE id = $1`, id)
	if errors.Is(err, db.ErrNotFound) {
		return v, fmt.Errorf("vendor %d: %w", id, db.ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("read vendor %d: %w", id, err)
	}
	v.fromDB()
	return v, nil
}
