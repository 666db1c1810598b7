package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/bulkimport/bulkimport/db"
	"github.com/bulkimport/bulkimport/jobs/problem"
)

// Team is an operations team that created accounts are linked to.
type Team struct {
	ID        int64     `db:"id" json:"-"`
	Name      string    `db:"name" json:"name"`
	CreatedAt time.Time `db:"created_at" json:"created_at"`
}

// CreateTeam stores a new operations team.
func CreateTeam(ctx context.Context, d *db.DB, name string) (Team, error) {
	var t Team
	if strings.TrimSpace(name) == "" {
		return t, problem.Invalidf("blank", "name", "The team name may not be blank.")
	}
	err := d.GetContext(ctx, &t, `INSERT INTO operations_teams (name) VALUES ($1) RETURNING *`, name)
	if db.IsUniqueViolation(err, "") {
		return t, problem.Invalidf("already_exists", "name", "Team %q already exists.", name)
	}
	if err != nil {
		return t, fmt.Errorf("create team: %w", err)
	}
	return t, nil
}

// ListTeams returns every team by name.
func ListTeams(ctx context.Context, d *db.DB) ([]Team, error) {
	out := []Team{}
	if err := d.SelectContext(ctx, &out, `SELECT * FROM operations_teams ORDER BY name`); err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return out, nil
}
