package admin

import (
	"context"
	"fmt"
	"strings"

	"github.com/lib/pq"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Product is a catalogue product with its tariffs. Agreements' tariff_code
// and transactions' product_code must match this catalogue.
type Product struct {
	Code    string         `db:"code" json:"code"`
	Tariffs pq.StringArray `db:"tariffs" json:"tariffs"`
}

// CreateProduct stores a product and its tariffs in one transaction.
func CreateProduct(ctx context.Context, d *db.DB, code string, tariffs []string) (Product, error) {
	p := Product{Code: code, Tariffs: tariffs}
	if strings.TrimSpace(code) == "" {
		return p, problem.Invalidf("blank", "code", "The product code may not be blank.")
	}
	if len(tariffs) == 0 {
		return p, problem.Invalidf("required", "tariff", "A product needs at least one tariff.")
	}
	err := db.InTx(ctx, d, func(tx *db.Tx) error {
		var id int64
		err := tx.GetContext(ctx, &id, `INSERT INTO products (code) VALUES ($1) RETURNING id`, code)
		if db.IsUniqueViolation(err, "") {
			return problem.Invalidf("already_exists", "code", "Product %s already exists.", code)
		}
		if err != nil {
			return fmt.Errorf("create product: %w", err)
		}
		for _, t := range tariffs {
			if strings.TrimSpace(t) == "" {
				return problem.Invalidf("blank", "tariff", "A tariff code may not be blank.")
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO tariffs (product_id, code) VALUES ($1, $2)`, id, t)
			if db.IsUniqueViolation(err, "") {
				return problem.Invalidf("already_exists", "tariff", "Tariff %s already exists.", t)
			}
			if err != nil {
				return fmt.Errorf("create tariff: %w", err)
			}
		}
		return nil
	})
	return p, err
}

// ListProducts returns every product with its tariffs.
func ListProducts(ctx context.Context, d *db.DB) ([]Product, error) {
	out := []Product{}
	err := d.SelectContext(ctx, &out, `
		SELECT p.code, coalesce(array_agg(t.code ORDER BY t.code) FILTER (WHERE t.code IS NOT NULL), '{}') AS tariffs
		FROM products p LEFT JOIN tariffs t ON t.product_id = p.id
		GROUP BY p.id ORDER BY p.code`)
	if err != nil {
		return nil, fmt.Errorf("list products: %w", err)
	}
	return out, nil
}
