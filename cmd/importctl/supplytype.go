package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/admin"
)

// supplyTypeCmd manages the catalogue of supply types that account
// payloads' supply_type must name (jobs/account/RULES.md).
func (c *cli) supplyTypeCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "supply-type", Short: "Manage the catalogue of supply types"}
	add := &cobra.Command{Use: "add CODE", Short: "Add a supply type (the five of the spec are there from the start)", Args: cobra.ExactArgs(1),
		RunE: c.withDB(func(ctx context.Context, d *db.DB, args []string) error {
			st, err := admin.AddSupplyType(ctx, d, args[0])
			if err != nil {
				return err
			}
			return c.done(st, fmt.Sprintf("added supply type %s", st.Code))
		})}
	list := &cobra.Command{Use: "list", Short: "List the supply types", Args: cobra.NoArgs,
		RunE: c.withDB(func(ctx context.Context, d *db.DB, _ []string) error {
			sts, err := admin.ListSupplyTypes(ctx, d)
			if err != nil {
				return err
			}
			rows := make([][]string, len(sts))
			for i, st := range sts {
				rows[i] = []string{st.Code, st.CreatedAt.UTC().Format(time.RFC3339)}
			}
			return c.print(sts, []string{"SUPPLY TYPE", "ADDED"}, rows)
		})}
	cmd.AddCommand(add, list)
	return cmd
}
