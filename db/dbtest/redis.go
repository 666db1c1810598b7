package dbtest

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// NewRedis returns a redis:// URL naming a Redis database number of the
// test's own, flushed before use and after the test. Numbers are handed out
// round-robin by a counter in database 0, so they never clash between tests
// that run at the same time unless more run at once than the server has
// databases (the local stack configures 1024).
func NewRedis(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("dbtest: TEST_REDIS_URL: %v", err)
	}
	opt.DB = 0
	c := redis.NewClient(opt)
	defer c.Close()
	count := 16
	if v, err := c.ConfigGet(ctx, "databases").Result(); err == nil {
		if n, err := strconv.Atoi(v["databases"]); err == nil && n > 1 {
			count = n
		}
	}
	n, err := c.Incr(ctx, "dbtest:next-db").Result()
	if err != nil {
		t.Fatalf("dbtest: redis at %s (run `make test`, which starts it): %v", RedisURL(), err)
	}
	num := 1 + int(n)%(count-1)
	flush := func() {
		o := *opt
		o.DB = num
		cc := redis.NewClient(&o)
		defer cc.Close()
		_ = cc.FlushDB(context.Background()).Err()
	}
	flush()
	t.Cleanup(flush)
	u, _ := url.Parse(RedisURL())
	u.Path = fmt.Sprintf("/%d", num)
	return u.String()
}
