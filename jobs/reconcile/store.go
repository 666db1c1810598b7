package reconcile

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
	"github.com/shopspring/decimal"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/account"
	"github.com/bulkimport/bulkimport/jobs/accountview"
	"github.com/bulkimport/bulkimport/jobs/imports"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Store computes the service's side: the summaries of a supplier's imported
// accounts from its rows. It reads them through accountview, the read model
// of one account, a page of accounts at a time.
type Store struct {
	db *db.DB
	// PageSize is how many accounts one page reads; zero means
	// DefaultPageSize.
	PageSize int
	// Prefetch is how many pages are read ahead of the one being sent;
	// zero means DefaultPrefetch.
	Prefetch int
}

// DefaultPageSize is the accounts read per page: enough that a round trip
// costs little beside the page's reading, few enough that a page's
// documents take a few megabytes.
const DefaultPageSize = 1000

// NewStore returns a Store of d.
func NewStore(d *db.DB) *Store { return &Store{db: d} }

// Supplier is the import supplier whose accounts are summarised.
type Supplier struct {
	ID   int64
	Code string
	// Country is the supplier's country, in which the cohort's side reads
	// national phone numbers and postcodes (FromCohortLine).
	Country string
}

// Supplier resolves a supplier code the caller may see. An invisible
// supplier answers exactly like a missing one: a *problem.Error of Kind
// NotFound, code import_supplier_not_found, as E10 to E13 answer.
func (s *Store) Supplier(ctx context.Context, code string, visible func(string) bool) (Supplier, error) {
	sup, ok, err := account.NewCatalog(s.db, visible).Supplier(ctx, code)
	if err != nil {
		return Supplier{}, fmt.Errorf("reconcile: %w", err)
	}
	if !ok {
		return Supplier{}, problem.New(problem.NotFound, imports.CodeImportSupplierNotFound, "Import supplier "+code+" does not exist.")
	}
	return Supplier{ID: sup.ID, Code: sup.Code, Country: sup.Country}, nil
}

// pageSQL is the next page of the supplier's accounts. The order is the
// bytes' ("C" collation), whatever the database's collation, because the
// client merges this stream with its own sorted in Go's string order.
// Keyset paging (external_account_number > the last one sent) holds no
// transaction or cursor while the client reads a page, however slowly.
const pageSQL = `SELECT id, external_account_number, service_account_number FROM accounts
WHERE supplier_id = $1 AND external_account_number COLLATE "C" > $2
ORDER BY external_account_number COLLATE "C" LIMIT $3`

// Stream calls emit with the summary of each account of sup created by E5
// whose external account number sorts after after (byte order; "" for all),
// in that order. Each page is read in one statement, so in one snapshot;
// an account deleted between two pages is not sent. An error from emit
// stops the stream and is returned.
//
// Pages are read ahead: while one page is sent, the next is read and
// summarised (Prefetch pages at most), so that the database, the
// summaries' computation and the client's reading overlap. A stream uses
// one database connection at a time: the listing of a page and the
// reading of another take turns, so that a request holds no more than the
// one connection its key's share of the pool counts (two per stream once
// let 16 streams of one key take a pool of 20). Each holds it only while
// its query runs.
func (s *Store) Stream(ctx context.Context, sup Supplier, after string, emit func(Summary) error) error {
	size := s.PageSize
	if size <= 0 {
		size = DefaultPageSize
	}
	ahead := s.Prefetch
	if ahead <= 0 {
		ahead = DefaultPrefetch
	}
	ctx, cancel := context.WithCancel(ctx)
	turn := make(chan struct{}, 1)
	var queue []*pageLoad
	defer func() {
		// Stop and wait for the pages still being read, so that none
		// outlives the stream.
		cancel()
		for _, p := range queue {
			<-p.done
		}
	}()
	send := func(p *pageLoad) error {
		<-p.done
		if p.err != nil {
			return p.err
		}
		for _, sum := range p.sums {
			if err := emit(sum); err != nil {
				return err
			}
		}
		return nil
	}
	for more := true; more; {
		var page []pageRow
		if err := takeTurn(ctx, turn, func() error {
			return sqlx.SelectContext(ctx, s.db, &page, pageSQL, sup.ID, after, size)
		}); err != nil {
			return fmt.Errorf("reconcile: page: %w", err)
		}
		more = len(page) == size
		if len(page) > 0 {
			after = page[len(page)-1].Number
			queue = append(queue, s.startLoad(ctx, turn, page))
		}
		for len(queue) > ahead || (!more && len(queue) > 0) {
			p := queue[0]
			queue = queue[1:]
			if err := send(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// DefaultPrefetch is how many pages are read ahead of the one being sent.
const DefaultPrefetch = 1

// pageRow is an account of a page, before its reading.
type pageRow struct {
	ID            int64  `db:"id"`
	Number        string `db:"external_account_number"`
	ServiceNumber string `db:"service_account_number"`
}

// pageLoad is a page being read and summarised; done is closed when sums
// or err is set.
type pageLoad struct {
	done chan struct{}
	sums []Summary
	err  error
}

// takeTurn runs fn while it holds turn, the stream's one connection.
func takeTurn(ctx context.Context, turn chan struct{}, fn func() error) error {
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-turn }()
	return fn()
}

// startLoad reads and summarises page in a goroutine; its reading waits
// for the stream's turn on the database.
func (s *Store) startLoad(ctx context.Context, turn chan struct{}, page []pageRow) *pageLoad {
	p := &pageLoad{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		ids := make([]int64, len(page))
		for i, r := range page {
			ids[i] = r.ID
		}
		var views map[int64]*accountview.Account
		err := takeTurn(ctx, turn, func() (err error) {
			views, err = s.load(ctx, ids)
			return err
		})
		if err != nil {
			p.err = err
			return
		}
		p.sums = make([]Summary, 0, len(page))
		for _, r := range page {
			a, ok := views[r.ID]
			if !ok {
				continue // deleted since the page was listed
			}
			sum, err := FromView(r.Number, a)
			if err != nil {
				p.err = fmt.Errorf("reconcile: account %s: %w", r.Number, err)
				return
			}
			p.sums = append(p.sums, sum)
		}
	}()
	return p
}

// load reads a page's accounts in a transaction of its own, closed before
// the page is sent. JIT compilation is off in it: on tables that have not
// been analysed since a migration filled them (autovacuum lags behind a
// bulk load), the planner's estimates for the account document query pass
// jit_above_cost, and compiling its few hundred expressions took seconds per
// page, ten times the query's own time.
func (s *Store) load(ctx context.Context, ids []int64) (map[int64]*accountview.Account, error) {
	tx, err := s.db.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SET LOCAL jit = off`); err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	views := make(map[int64]*accountview.Account, len(ids))
	err = accountview.LoadAccounts(ctx, tx, ids, func(id int64, a *accountview.Account) error {
		views[id] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reconcile: %w", err)
	}
	return views, nil
}

// FromView computes the summary of an account as the service holds it.
func FromView(externalAccountNumber string, a *accountview.Account) (Summary, error) {
	c, err := canonicalFromView(externalAccountNumber, a)
	if err != nil {
		return Summary{}, err
	}
	s := summarise(&c)
	s.ServiceAccountNumber = a.ServiceAccountNumber
	sum := decimal.Zero
	for _, t := range a.Transactions {
		sum = sum.Add(t.Amount.Decimal)
	}
	s.TransactionsSum, s.LedgerBalance = money(sum), money(a.Ledger.Balance.Decimal)
	return s, nil
}

// CanonicalFromView is the canonical form of an account as the service
// holds it (the account detail the API answers, accountview.Account), as
// FromView digests it (lists in their canonical order, an omitted list
// empty): the service's side of Diff.
func CanonicalFromView(externalAccountNumber string, a *accountview.Account) (Canonical, error) {
	c, err := canonicalFromView(externalAccountNumber, a)
	if err != nil {
		return Canonical{}, err
	}
	c.sortLists()
	return c.normalised(), nil
}

func canonicalFromView(ext string, a *accountview.Account) (Canonical, error) {
	c := Canonical{ExternalAccountNumber: ext, UnknownOccupier: a.UnknownOccupier}
	b := a.BillingAddress
	c.BillingAddress = CanonicalAddress{StreetAddress: b.StreetAddress, Locality: b.Locality,
		AdministrativeArea: b.AdministrativeArea, Country: b.Country, PostalCode: b.PostalCode}
	if a.Business != nil {
		id := a.Business.ContractIdentifier
		c.BusinessContract = &id
	}
	for _, cu := range a.Customers {
		cc := CanonicalCustomer{GivenName: cu.GivenName, FamilyName: cu.FamilyName, Email: cu.Email,
			Mobile: cu.Mobile, Landline: cu.Landline, AlternativePhoneNumbers: cu.AlternativePhoneNumbers,
			DateOfBirth: cu.DateOfBirth, OptedIntoUpdates: cu.OptedIntoUpdates, OptedIntoOffers: cu.OptedIntoOffers,
			OptedIntoSMS: cu.OptedIntoSMS}
		for _, d := range cu.UserDetails {
			cc.UserDetails = append(cc.UserDetails, CanonicalField{Name: d.Namespace, Value: d.Value})
		}
		c.Customers = append(c.Customers, cc)
	}
	for _, sa := range a.SupplyAddresses {
		l1 := sa.SupplyAddress1
		cs := CanonicalSupply{Lines: [4]*string{&l1, sa.SupplyAddress2, sa.SupplyAddress3, sa.SupplyAddress4},
			Postcode: sa.SupplyPostcode, FromDate: sa.CustomerAtSupplyAddressFromDate}
		for _, sp := range sa.SupplyPoints {
			p := CanonicalPoint{SupplyType: sp.SupplyType, SupplyStartDate: sp.SupplyStartDate, LastBilledToDate: sp.LastBilledToDate}
			var err error
			if p.Fields, err = fieldsOf(sp.Fields); err != nil {
				return c, err
			}
			for _, m := range sp.Meters {
				cm := CanonicalMeter{SerialNumber: m.SerialNumber, Subgroup: m.Subgroup, SealDate: m.SealDate,
					MeterNumber: m.MeterNumber, Status: m.Status, ActiveFrom: m.ActiveFrom}
				if cm.MeterType, err = fieldsOf(m.MeterType); err != nil {
					return c, err
				}
				for _, r := range m.Registers {
					cm.Registers = append(cm.Registers, CanonicalRegister{RegisterType: r.RegisterType,
						WholeDigits: r.WholeDigits, DecimalDigits: r.DecimalDigits, ActiveFrom: r.ActiveFrom,
						Multiplier: canonicalDecimalPtr(r.Multiplier)})
				}
				p.Meters = append(p.Meters, cm)
			}
			for _, ag := range sp.Agreements {
				p.Agreements = append(p.Agreements, CanonicalField{Name: ag.EffectiveFrom, Value: ag.TariffCode})
			}
			for _, tr := range sp.TransferReadings {
				p.TransferReadings = append(p.TransferReadings, CanonicalReading{RegisterType: tr.RegisterType,
					ReadDate: tr.ReadDate, Value: tr.Value})
			}
			cs.SupplyPoints = append(cs.SupplyPoints, p)
		}
		c.SupplyAddresses = append(c.SupplyAddresses, cs)
	}
	for _, m := range a.Metadata {
		v, err := CanonicalJSON(m.Value)
		if err != nil {
			return c, err
		}
		c.Metadata = append(c.Metadata, CanonicalField{Name: m.Key, Value: v})
	}
	for _, n := range a.Notes {
		if isMoveNote(n.Body, n.IsPinned) {
			continue
		}
		cn := CanonicalNote{Body: n.Body, IsPinned: n.IsPinned, DocumentPaths: n.DocumentPaths}
		if n.UnpinAt != nil {
			s := utc(*n.UnpinAt)
			cn.UnpinAt = &s
		}
		c.Notes = append(c.Notes, cn)
	}
	for _, t := range a.Transactions {
		ct := CanonicalTx{TransactionID: t.TransactionID, TransactionDate: t.TransactionDate, Type: t.Type,
			Amount: money(t.Amount.Decimal), Reason: t.Reason, DisplayNote: t.DisplayNote, Note: t.Note,
			Reference: t.Reference, PaymentType: t.PaymentType, ProductCode: t.ProductCode,
			ToPrepayMeterSerialNumber: t.ToPrepayMeterSerialNumber}
		if t.OriginalTransactionDate != nil {
			ct.TransactionDate = *t.OriginalTransactionDate
		}
		for _, l := range t.LineItems {
			cl := CanonicalLine{RateBand: l.RateBand, StartDate: l.StartDate, EndDate: l.EndDate,
				NumberOfUnits: l.NumberOfUnits.String(), NetAmount: money(l.NetAmount.Decimal),
				PricePerUnit: l.PricePerUnit.String()}
			for _, u := range l.Units {
				cl.Units = append(cl.Units, u.String())
			}
			ct.LineItems = append(ct.LineItems, cl)
		}
		for _, x := range t.TaxItems {
			ct.TaxItems = append(ct.TaxItems, CanonicalTax{Amount: money(x.Amount.Decimal), TaxType: x.TaxType,
				ValueTaxed: money(x.ValueTaxed.Decimal), Rate: x.Rate.String(), UnitType: x.UnitType})
		}
		c.Transactions = append(c.Transactions, ct)
	}
	for _, st := range a.Statements {
		c.Statements = append(c.Statements, CanonicalSt{StatementID: st.StatementID, Number: st.Number,
			BillPeriodFromDate: st.BillPeriodFromDate, BillPeriodToDate: st.BillPeriodToDate,
			IssuedDate: st.IssuedDate, GrossAmount: st.GrossAmount, StatementPath: st.StatementPath})
	}
	var last *decimal.Decimal
	if b := a.Ledger.LastStatementBalance; b != nil {
		last = &b.Decimal
	}
	c.Ledger = canonicalLedger(a.Ledger.LastStatementClosingDate, a.Ledger.LastStatementIssueDate, last)
	for _, p := range a.PaymentInstructions {
		if p.For != "account" {
			continue // a business's (E2): no cohort line sends it
		}
		c.PaymentInstructions = append(c.PaymentInstructions, CanonicalPayment{Vendor: p.Vendor, Reference: p.Reference, Type: p.Type})
	}
	return c, nil
}
