package validate

import (
	"context"
	"fmt"
)

// Phase names the part of a request's validation that has just ended when
// Checkpoint is called. Not every endpoint has every phase.
type Phase string

// The phases of a request's validation, in the order they run.
const (
	// Parsed: the body is a tree of values (ParseBody).
	Parsed Phase = "parse"
	// Bound: the schema has bound the tree, with each field's own problems
	// (Bind).
	Bound Phase = "bind"
	// LookedUp: the database has answered what the checks need (the
	// catalogue, the supplier's time zone).
	LookedUp Phase = "lookup"
)

// Checkpoint ends phase p of a request's validation. It returns an error
// once ctx is done (the client hung up), and nil otherwise. Every endpoint
// that parses and checks a body calls it between its phases (parse, bind,
// lookups, checks), so that a client that hangs up leaves at most one
// phase of work behind, each linear in a body that MAX_BODY_BYTES bounds.
// Without it, a 10 MiB body was parsed, bound and checked to the end for
// no one.
//
// The error wraps ctx.Err(): context.Canceled for a client that hung up,
// which the API answers as a closed request (logged at INFO with status
// 499), never as a 500.
func Checkpoint(ctx context.Context, p Phase) error {
	if f, _ := ctx.Value(checkpointKey{}).(func(Phase)); f != nil {
		f(p)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped after the %s: %w", p, err)
	}
	return nil
}

type checkpointKey struct{}

// WithCheckpoints returns ctx whose Checkpoints call f with their phase
// before they look at ctx, so that a test can see which phases a request
// went through, and cancel it between two of them. The service never sets
// one.
func WithCheckpoints(ctx context.Context, f func(Phase)) context.Context {
	return context.WithValue(ctx, checkpointKey{}, f)
}
