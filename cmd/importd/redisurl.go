package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hibiken/asynq"
)

// parseRedisURL reads REDIS_URL in one of three topologies:
//
//   - redis://[user:pass@]host:port/db and rediss://... (TLS): one server,
//     asynq.RedisClientOpt;
//   - redis-sentinel://[:pass@]host1:port,host2:port/db?master=NAME: a
//     Sentinel-managed primary, asynq.RedisFailoverClientOpt (pass is the
//     Sentinels' password; &username= and &password= are the primary's);
//   - redis-cluster://[user:pass@]host1:port,host2:port: a Redis Cluster
//     given by some of its nodes, asynq.RedisClusterClientOpt. A cluster has
//     only database 0, so no /db is accepted.
//
// The first two are asynq.ParseRedisURI's (with the sentinel form's
// database and master checked); the cluster form is ours, since asynq does
// not parse one. Each option's MakeRedisClient returns a
// redis.UniversalClient, which the API's pub/sub needs.
func parseRedisURL(v string) (asynq.RedisConnOpt, error) {
	switch {
	case strings.HasPrefix(v, "redis-sentinel://"):
		return parseSentinelURL(v)
	case strings.HasPrefix(v, "redis-cluster://"):
		return parseClusterURL(v)
	}
	return asynq.ParseRedisURI(v)
}

// parseSentinelURL is asynq.ParseRedisURI's sentinel form, which ignores
// the /db of the URL and accepts one without a master: both would only
// show up later, as data in database 0 or a failure to connect. As in
// asynq, the URL's password is the Sentinels' (SentinelPassword). A primary
// that requires a password of its own (requirepass, or an ACL user) gets
// it from ?username= and ?password=, which asynq's form cannot express;
// Sentinels and primary are often secured separately, so one password for
// both would not do. Values are percent-encoded ('+' is a space, as in any
// query). Any other parameter, a repeated one or one that does not decode is
// refused, so that a slip fails at start-up instead of at the first
// connection.
func parseSentinelURL(v string) (asynq.RedisConnOpt, error) {
	o, err := asynq.ParseRedisURI(v)
	if err != nil {
		return nil, err
	}
	opt := o.(asynq.RedisFailoverClientOpt)
	if opt.MasterName == "" {
		return nil, errors.New("redis-sentinel:// needs ?master=NAME")
	}
	for _, a := range opt.SentinelAddrs {
		if !isHostPort(a) {
			return nil, fmt.Errorf("sentinel %q must be host:port", a)
		}
	}
	u, _ := url.Parse(v) // parsed by asynq already
	// url.Values would drop a malformed pair and keep the first of two, so a
	// mistyped password would surface only as NOAUTH at the first
	// connection. Here every such slip stops the start instead.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("redis-sentinel:// parameters do not parse (percent-encode special characters in a password): %w", err)
	}
	if u.Fragment != "" {
		return nil, errors.New("redis-sentinel:// URL has a #fragment; percent-encode '#' in a password as %23")
	}
	for k, vs := range q {
		if k != "master" && k != "username" && k != "password" {
			return nil, fmt.Errorf("redis-sentinel:// takes only ?master=, &username= and &password=, not %q", k)
		}
		if len(vs) > 1 {
			return nil, fmt.Errorf("redis-sentinel:// parameter %q is given %d times", k, len(vs))
		}
	}
	opt.Username, opt.Password = q.Get("username"), q.Get("password")
	if p := strings.Trim(u.Path, "/"); p != "" {
		db, err := strconv.Atoi(p)
		if err != nil || db < 0 {
			return nil, fmt.Errorf("database %q must be a number", p)
		}
		opt.DB = db
	}
	return opt, nil
}

// parseClusterURL reads redis-cluster://[user:pass@]host1:port,host2:port.
func parseClusterURL(v string) (asynq.RedisConnOpt, error) {
	u, err := url.Parse(v)
	if err != nil {
		return nil, errors.New("redis-cluster:// URL does not parse; use redis-cluster://[user:pass@]host1:port,host2:port")
	}
	if p := strings.Trim(u.Path, "/"); p != "" && p != "0" {
		return nil, fmt.Errorf("a Redis Cluster has only database 0, not %q", p)
	}
	if u.RawQuery != "" {
		return nil, errors.New("redis-cluster:// takes no query parameters")
	}
	var addrs []string
	for _, a := range strings.Split(u.Host, ",") {
		if !isHostPort(a) {
			return nil, fmt.Errorf("cluster node %q must be host:port", a)
		}
		addrs = append(addrs, a)
	}
	opt := asynq.RedisClusterClientOpt{Addrs: addrs}
	if u.User != nil {
		opt.Username = u.User.Username()
		opt.Password, _ = u.User.Password()
	}
	return opt, nil
}

func isHostPort(a string) bool {
	host, port, err := net.SplitHostPort(a)
	return err == nil && host != "" && port != ""
}
