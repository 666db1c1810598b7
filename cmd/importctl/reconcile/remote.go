package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bulkimport/bulkimport/cmd/importctl/migrate"
	jr "github.com/bulkimport/bulkimport/jobs/reconcile"
)

// headerCountry is api.HeaderSupplierCountry (cmd/importctl talks to the
// service over HTTP only and does not import api).
const headerCountry = "Import-Supplier-Country"

// remote reads the service's stream of summaries. A stream that breaks
// (a connection reset, the service restarting) is opened again after the
// last summary read, up to retries times in a row, so a long reconciliation
// survives what a long download would not.
type remote struct {
	base, supplier string
	tokens         *migrate.Tokens
	hc             *http.Client
	retries        int
	backoff        time.Duration

	after   string
	body    io.ReadCloser
	dec     *json.Decoder
	country string
	done    bool
}

// errSupplierNotFound is the service's 404: the supplier does not exist or
// the API key may not see it (the two answer alike).
var errSupplierNotFound = errors.New("the service knows no import supplier of this code that the API key may see")

func (r *remote) open(ctx context.Context) error {
	renew := false
	var last error
	for try := 0; try <= r.retries; try++ {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(r.backoff * time.Duration(1<<min(try-1, 5))):
			}
		}
		tok, err := r.tokens.Token(ctx, renew)
		if err != nil {
			return err
		}
		renew = false
		u := r.base + "/v1/data-import/reconciliation/" + url.PathEscape(r.supplier) + "/"
		if r.after != "" {
			u += "?after=" + url.QueryEscape(r.after)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Token "+tok)
		res, err := r.hc.Do(req)
		if err != nil {
			last = err
			continue
		}
		switch {
		case res.StatusCode == http.StatusOK:
			r.body, r.dec = res.Body, json.NewDecoder(res.Body)
			r.dec.UseNumber()
			r.country = res.Header.Get(headerCountry)
			t, err := r.dec.Token()
			if err != nil || t != json.Delim('[') {
				res.Body.Close()
				last = fmt.Errorf("the stream does not start with [: %v", err)
				continue
			}
			return nil
		case res.StatusCode == http.StatusNotFound:
			res.Body.Close()
			return errSupplierNotFound
		case res.StatusCode == http.StatusUnauthorized:
			renew = true
		}
		b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
		res.Body.Close()
		last = fmt.Errorf("reconciliation stream answered %d: %s", res.StatusCode, strings.Join(strings.Fields(string(b)), " "))
		if res.StatusCode < 500 && res.StatusCode != http.StatusTooManyRequests && res.StatusCode != http.StatusUnauthorized {
			return last
		}
	}
	return fmt.Errorf("cannot read the service's summaries: %w", last)
}

// next returns the next summary; ok is false at the end of the stream.
func (r *remote) next(ctx context.Context) (s jr.Summary, ok bool, err error) {
	for fails := 0; ; fails++ {
		if r.done {
			return s, false, nil
		}
		if r.dec == nil {
			if err := r.open(ctx); err != nil {
				return s, false, err
			}
		}
		if r.dec.More() {
			var got jr.Summary
			if err = r.dec.Decode(&got); err == nil {
				r.after = got.ExternalAccountNumber
				return got, true, nil
			}
		} else if _, err = r.dec.Token(); err == nil { // the closing ]
			r.close()
			r.done = true
			return s, false, nil
		}
		// The stream broke: open it again after the last summary read.
		r.close()
		if fails >= r.retries {
			return s, false, fmt.Errorf("the service's stream broke after %q: %w", r.after, err)
		}
	}
}

func (r *remote) close() {
	if r.body != nil {
		r.body.Close()
	}
	r.body, r.dec = nil, nil
}
