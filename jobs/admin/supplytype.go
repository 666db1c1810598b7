package admin

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/validate"
)

// SupplyType is a supply type of the catalogue that account payloads'
// supply_type must name (jobs/account, supply_type_not_recognised).
type SupplyType struct {
	Code      string    `db:"code" json:"code"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// AddSupplyType adds a supply type to the catalogue. The five of spec 2.2.4
// are there from the start (migration 00026); a supply type other than
// those keeps its fields as sent. Types are never removed: a payload staged
// with a type stays valid until its account is created.
//
// Errors: blank, invalid_choice (over validate.MaxCodeLength characters or
// with U+0000) and already_exists, each at code.
func AddSupplyType(ctx context.Context, d *db.DB, code string) (SupplyType, error) {
	st := SupplyType{Code: code}
	switch {
	case strings.TrimSpace(code) == "":
		return st, problem.Invalidf("blank", "code", "The supply type may not be blank.")
	case utf8.RuneCountInString(code) > validate.MaxCodeLength || strings.IndexByte(code, 0) >= 0:
		return st, problem.Invalidf("invalid_choice", "code", "A supply type is a code of at most %d characters.", validate.MaxCodeLength)
	}
	err := d.GetContext(ctx, &st, `INSERT INTO supply_types (code) VALUES ($1) RETURNING *`, code)
	if db.IsUniqueViolation(err, "") {
		return st, problem.Invalidf("already_exists", "code", "Supply type %s already exists.", code)
	}
	if err != nil {
		return st, fmt.Errorf("add supply type: %w", err)
	}
	return st, nil
}

// ListSupplyTypes returns the catalogue's supply types by code.
func ListSupplyTypes(ctx context.Context, d *db.DB) ([]SupplyType, error) {
	out := []SupplyType{}
	if err := d.SelectContext(ctx, &out, `SELECT code, created_at FROM supply_types ORDER BY code`); err != nil {
		return nil, fmt.Errorf("list supply types: %w", err)
	}
	return out, nil
}
