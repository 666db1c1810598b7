package creation

import (
	"context"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/bulkimport/bulkimport/jobs"
	"github.com/bulkimport/bulkimport/jobs/problem"
	"github.com/bulkimport/bulkimport/jobs/slots"
	"github.com/bulkimport/bulkimport/jobs/taskwait"
)

// Announcer ends an account task for the requests that wait for it: it
// frees the task's concurrency slot and announces the outcome on the task's
// done channel, in one Redis round trip. Both are best effort: PostgreSQL
// already holds the outcome, and a waiter that hears nothing reads it there
// when its wait ends. A release that failed is retried in the background
// (slots.RetryRelease). The Creator ends its tasks through it, and the
// Sweeper the tasks that ended without their handler.
type Announcer struct {
	rdb redis.UniversalClient
	log *slog.Logger
}

// NewAnnouncer returns the Announcer of rdb. log reports the releases and
// announcements that failed; it must not be nil.
func NewAnnouncer(rdb redis.UniversalClient, log *slog.Logger) *Announcer {
	if log == nil {
		panic("creation.NewAnnouncer: nil *slog.Logger")
	}
	return &Announcer{rdb: rdb, log: log}
}

// Created announces that the task taskID created the account under the
// service account number (or found it created). Call it only once the
// account is committed: a waiting E5 answers with the number as it hears
// it, without reading PostgreSQL.
func (a *Announcer) Created(ctx context.Context, taskID, serviceAccountNumber string) {
	a.finish(ctx, taskID, jobs.AccountOutcome{Outcome: jobs.AccountOutcomeCreated, ServiceAccountNumber: serviceAccountNumber})
}

// Failed announces that the task taskID ended with the failure rec, the
// refusal of the account or the service's failure.
func (a *Announcer) Failed(ctx context.Context, taskID string, rec problem.Record) {
	a.finish(ctx, taskID, jobs.AccountOutcome{Outcome: jobs.AccountOutcomeFailed, Error: &rec})
}

// DryRunSucceeded announces that the dry run taskID would have created the
// account.
func (a *Announcer) DryRunSucceeded(ctx context.Context, taskID string) {
	a.finish(ctx, taskID, jobs.AccountOutcome{Outcome: jobs.AccountOutcomeDryRunSucceeded})
}

// finish frees the slot of taskID and wakes its waiters with o.
func (a *Announcer) finish(ctx context.Context, taskID string, o jobs.AccountOutcome) {
	ctx = context.WithoutCancel(ctx)
	var release *redis.IntCmd
	err := taskwait.PublishWith(ctx, a.rdb, taskID, o, func(p redis.Pipeliner) { release = slots.ReleaseIn(ctx, p, taskID) })
	if release != nil && release.Err() != nil {
		go slots.RetryRelease(ctx, a.rdb, taskID)
		a.log.WarnContext(ctx, "release slot", "task_id", taskID, "error", release.Err())
	}
	if err != nil {
		a.log.WarnContext(ctx, "publish outcome", "task_id", taskID, "error", err)
	}
}
