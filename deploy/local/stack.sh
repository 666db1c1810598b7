#!/usr/bin/env bash
# Starts (or reuses) a private PostgreSQL cluster and redis-server on loopback,
# under .local/, installing the Debian packages when the binaries are missing.
#
#   stack.sh up     start both if they are not running; print nothing else on success
#   stack.sh env    print export lines for the tools (DATABASE_URL, REDIS_URL,
#                   TOKEN_SECRET, DOCUMENTS_URL, HTTP_ADDR, IMPORTCTL_URL, and
#                   IMPORTCTL_API_KEY once `make run` has made the demo's key)
#   stack.sh env importctl  only those importctl reads (DATABASE_URL,
#                   DOCUMENTS_URL, IMPORTCTL_URL, IMPORTCTL_API_KEY): what
#                   `make -s env` puts in a user's shell, without importd's
#                   TOKEN_SECRET, which signs every token
#   stack.sh down   stop both
#   stack.sh check-ports  fail, naming the port, what holds it and the variable
#                   that moves it, when a port `make run` listens on is taken
#   stack.sh promtool  install Debian's prometheus package (for promtool, which
#                   checks deploy/prometheus's alerting rules) when missing;
#                   without root it only warns, and that test skips itself
#   stack.sh chromium  install Debian's chromium for the browser test of the
#                   migration page when it is missing; without root it only
#                   warns, and that test skips itself
#
# When DATABASE_URL and REDIS_URL are both set, the script uses them and starts
# nothing. Ports come from STACK_PG_PORT (default 55432) and STACK_REDIS_PORT
# (default 56379). Idempotent: safe to run while the servers are already up.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
local_dir="$here/.local"
pg_port=${STACK_PG_PORT:-55432}
redis_port=${STACK_REDIS_PORT:-56379}
pg_data="$local_dir/pg" # see choose_pg_data
redis_dir="$local_dir/redis"
pg_user=importd
pg_db=importd

log() { echo "stack: $*" >&2; }
die() { echo "stack: error: $*" >&2; exit 1; }

external() { [[ -n "${DATABASE_URL:-}" && -n "${REDIS_URL:-}" ]]; }

find_pg_bin() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[[ -x "$d/initdb" ]] && { echo "$d"; return 0; }
	done
	command -v initdb >/dev/null 2>&1 && { dirname "$(command -v initdb)"; return 0; }
	return 1
}

apt_install() {
	if [[ $(id -u) -ne 0 ]]; then
		die "$1 is missing and installing it needs root. Run as root, or install the Debian package(s) '$2' yourself, or set DATABASE_URL and REDIS_URL to existing servers."
	fi
	command -v apt-get >/dev/null 2>&1 || die "$1 is missing and apt-get is not available; install '$2' or set DATABASE_URL and REDIS_URL."
	log "installing $2 with apt-get"
	# The update is needed once on a fresh machine; its failure is not fatal
	# when the package lists are already present.
	apt-get update -qq >/dev/null 2>&1 || log "apt-get update failed; trying the install anyway"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $2 >/dev/null ||
		die "apt-get install $2 failed"
}

# run_as_pg runs a command as the cluster owner. initdb and postgres refuse to
# run as root, so root uses the 'postgres' system user the Debian package made.
# It runs from /, since 'postgres' may not be allowed into the current one.
run_as_pg() {
	if [[ $(id -u) -eq 0 ]]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

# choose_pg_data sets pg_data. When root runs this script, the cluster belongs
# to 'postgres', which must be able to reach it: a clone under a directory it
# cannot enter (root's home is mode 700) made initdb fail with "Permission
# denied". The cluster then lives under postgres's own home instead, in a
# directory named after the checkout so that two checkouts do not share it.
choose_pg_data() {
	pg_data="$local_dir/pg"
	if [[ $(id -u) -eq 0 ]] && ! (cd / && runuser -u postgres -- test -x "$local_dir") 2>/dev/null; then
		pg_data="/var/lib/postgresql/bulkimport-$(printf %s "$here" | cksum | cut -d' ' -f1)"
	fi
}

pg_up() {
	local bin
	bin=$(find_pg_bin) || { apt_install PostgreSQL "postgresql"; bin=$(find_pg_bin) || die "PostgreSQL binaries not found after install"; }
	if [[ $(id -u) -eq 0 ]] && ! id postgres >/dev/null 2>&1; then
		useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
	fi
	mkdir -p "$local_dir"
	choose_pg_data
	if [[ ! -s "$pg_data/PG_VERSION" ]]; then
		log "initialising a PostgreSQL cluster in $pg_data"
		mkdir -p "$pg_data"
		[[ $(id -u) -eq 0 ]] && chown postgres: "$pg_data"
		chmod 700 "$pg_data"
		run_as_pg "$bin/initdb" -D "$pg_data" -U "$pg_user" --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
		cat >>"$pg_data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = '$pg_data'
max_connections = 400
shared_buffers = 256MB
CONF
	fi
	if run_as_pg "$bin/pg_ctl" -D "$pg_data" status >/dev/null 2>&1; then
		:
	else
		log "starting PostgreSQL on 127.0.0.1:$pg_port"
		# pg_stat_statements for the benchmarks' statement profile
		# (E5_STATEMENTS=1 make bench); a server option rather than a line of
		# postgresql.conf, so that clusters made before it get it too.
		run_as_pg "$bin/pg_ctl" -D "$pg_data" -l "$pg_data/server.log" -w -t 60 \
			-o "-c shared_preload_libraries=pg_stat_statements" start >/dev/null ||
			die "PostgreSQL did not start; see $pg_data/server.log"
	fi
	if ! "$bin/psql" -h 127.0.0.1 -p "$pg_port" -U "$pg_user" -d postgres -Atqc "select 1 from pg_database where datname='$pg_db'" | grep -q 1; then
		"$bin/createdb" -h 127.0.0.1 -p "$pg_port" -U "$pg_user" "$pg_db"
	fi
}

redis_up() {
	command -v redis-server >/dev/null 2>&1 || apt_install Redis "redis-server"
	mkdir -p "$redis_dir"
	if redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null | grep -q PONG; then
		return 0
	fi
	log "starting redis-server on 127.0.0.1:$redis_port"
	# Many databases so that parallel tests can each take one of their own.
	# Append-only, because queued jobs live in Redis.
	redis-server --bind 127.0.0.1 --port "$redis_port" --dir "$redis_dir" \
		--databases 1024 --appendonly yes --save '' --daemonize yes \
		--pidfile "$redis_dir/redis.pid" --logfile "$redis_dir/redis.log" >/dev/null
	for _ in $(seq 1 50); do
		redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.1
	done
	die "redis-server did not start; see $redis_dir/redis.log"
}

down() {
	local bin
	choose_pg_data
	if bin=$(find_pg_bin) && [[ -s "$pg_data/PG_VERSION" ]]; then
		run_as_pg "$bin/pg_ctl" -D "$pg_data" -m fast stop >/dev/null 2>&1 && log "PostgreSQL stopped" || true
	fi
	if command -v redis-cli >/dev/null 2>&1 && redis-cli -h 127.0.0.1 -p "$redis_port" ping 2>/dev/null | grep -q PONG; then
		redis-cli -h 127.0.0.1 -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
		log "redis-server stopped"
	fi
}

# secret FILE: print FILE, creating it with 32 random bytes in hex first (the
# same files make run uses, so that the tools and importd agree).
secret() {
	if [[ ! -s "$1" ]]; then
		mkdir -p "$(dirname "$1")"
		(umask 077 && head -c 32 /dev/urandom | od -An -vtx1 | tr -d ' \n' >"$1")
	fi
	chmod 600 "$1"
	cat "$1"
}

# print_env prints export lines for every variable importd, importctl and
# demo.sh need against the local stack; values already set are kept. With
# "importctl", only those importctl reads: a user's shell (make -s env) gets
# no server secret and nothing importctl ignores.
print_env() {
	local only=${1:-}
	if [[ -n $only && $only != importctl ]]; then
		usage >&2
		exit 2
	fi
	if external; then
		echo "export DATABASE_URL='$DATABASE_URL'"
		[[ -n $only ]] || echo "export REDIS_URL='$REDIS_URL'"
	else
		echo "export DATABASE_URL='postgres://$pg_user@127.0.0.1:$pg_port/$pg_db?sslmode=disable'"
		[[ -n $only ]] || echo "export REDIS_URL='redis://127.0.0.1:$redis_port/0'"
	fi
	mkdir -p "$local_dir/documents"
	[[ -n $only ]] || echo "export TOKEN_SECRET='${TOKEN_SECRET:-$(secret "$local_dir/token_secret")}'"
	echo "export DOCUMENTS_URL='${DOCUMENTS_URL:-file://$local_dir/documents}'"
	[[ -n $only ]] || echo "export HTTP_ADDR='${HTTP_ADDR:-127.0.0.1:8080}'"
	echo "export IMPORTCTL_URL='${IMPORTCTL_URL:-http://${HTTP_ADDR:-127.0.0.1:8080}}'"
	# The demo's API key, which deploy/local/demo.sh keeps in its file (the
	# key alone; a file of an earlier demo has the key's name on a line
	# before it) and replaces at the next `make run` when it was revoked or
	# the database was reset; a key set in the environment wins.
	local key_file=${DEMO_KEY_FILE:-$local_dir/demo_api_key} key=""
	if [[ -z ${IMPORTCTL_API_KEY:-} && -r $key_file ]]; then
		key=$(awk 'NF { k = $0 } END { print k }' "$key_file")
	fi
	if [[ -n ${IMPORTCTL_API_KEY:-} || -n $key ]]; then
		echo "export IMPORTCTL_API_KEY='${IMPORTCTL_API_KEY:-$key}'"
	fi
}

# chromium_up installs the browser the migration page's test drives
# (cmd/importd/migration_browser_test.go). Unlike the servers it is optional:
# a machine without root gets a warning, not an error.
chromium_up() {
	command -v chromium >/dev/null 2>&1 && return 0
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		log "chromium is missing and installing it needs root and apt-get; the browser test of the migration page will skip"
		return 0
	fi
	apt_install chromium chromium
}

# promtool_up installs promtool, which the test of deploy/prometheus's
# alerting rules runs; like chromium_up, it only warns without root. The
# package's own server is not started (its service is left to the operator).
promtool_up() {
	command -v promtool >/dev/null 2>&1 && return 0
	if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
		log "promtool is missing and installing it needs root and apt-get; the test of the alerting rules will skip"
		return 0
	fi
	apt_install promtool prometheus
}

# haproxy_up installs HAProxy, which `make scale` puts in front of its API
# replicas (cmd/importd/scale_topology_test.go). The run needs it, so
# unlike chromium_up a missing one that cannot be installed is an error.
haproxy_up() {
	command -v haproxy >/dev/null 2>&1 || [[ -x /usr/sbin/haproxy ]] || apt_install HAProxy haproxy
}

# listening PORT: whether something listens on TCP PORT (any address).
listening() {
	if command -v ss >/dev/null 2>&1; then
		[[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]]
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

# holder PORT: "pid 1234 (python3)" for the process listening on PORT when
# ss can tell (it names other users' processes only to root), else nothing.
holder() {
	command -v ss >/dev/null 2>&1 || return 0
	ss -Hltnp "sport = :$1" 2>/dev/null |
		sed -nE 's/.*users:\(\("([^"]*)",pid=([0-9]+).*/pid \2 (\1)/p' | head -n 1
}

# free_after PORT: the first port above PORT that nothing listens on.
free_after() {
	local p
	for ((p = $1 + 1; p < $1 + 100 && p < 65536; p++)); do
		listening "$p" || { echo "$p"; return 0; }
	done
	echo "$(($1 + 1))"
}

# ours_pg: whether the PostgreSQL listening on pg_port is this stack's
# cluster (its postmaster.pid names that port and a live process).
ours_pg() {
	local pidfile
	choose_pg_data
	pidfile=$pg_data/postmaster.pid
	[[ -r $pidfile ]] || return 1
	[[ $(sed -n 4p "$pidfile") == "$pg_port" ]] && kill -0 "$(sed -n 1p "$pidfile")" 2>/dev/null
}

# ours_redis: whether the Redis listening on redis_port is this stack's (its
# working directory is .local/redis).
ours_redis() {
	command -v redis-cli >/dev/null 2>&1 || return 1
	[[ $(redis-cli -h 127.0.0.1 -p "$redis_port" config get dir 2>/dev/null | sed -n 2p) == "$redis_dir" ]]
}

# check_ports checks, before `make run` starts or provisions anything, that
# every port it will listen on is free: HTTP_ADDR (the API and the
# dashboard), METRICS_ADDR when set, VENDOR_SIM_ADDR (the payment vendor
# simulator), and the stack's PostgreSQL and Redis ports unless the stack's
# own servers already run there (a stack left up by an earlier run). A
# vendor simulator that importctl already serves is reused by demo.sh, so it
# is no conflict either. Prints one line per busy port and fails.
check_ports() {
	local busy=0 var addr port host who
	# busy_port VAR PORT SUGGESTION-PREFIX
	busy_port() {
		who=$(holder "$2")
		echo "stack: port $2 ($1) is in use${who:+ by $who}; set $1=$3$(free_after "$2") to use another" >&2
		busy=1
	}
	for var in HTTP_ADDR METRICS_ADDR VENDOR_SIM_ADDR; do
		case $var in
		HTTP_ADDR) addr=${HTTP_ADDR:-127.0.0.1:8080} ;;
		METRICS_ADDR) addr=${METRICS_ADDR:-} ;;
		VENDOR_SIM_ADDR) addr=${VENDOR_SIM_ADDR:-127.0.0.1:18090} ;;
		esac
		[[ -n $addr ]] || continue
		port=${addr##*:} host=${addr%:*}
		[[ $port =~ ^[0-9]+$ && $port != 0 ]] || continue
		listening "$port" || continue
		if [[ $var == VENDOR_SIM_ADDR && $(holder "$port") == *"(importctl)" ]]; then
			continue
		fi
		busy_port "$var" "$port" "$host:"
	done
	if ! external; then
		if listening "$pg_port" && ! ours_pg; then
			busy_port STACK_PG_PORT "$pg_port" ""
		fi
		if listening "$redis_port" && ! ours_redis; then
			busy_port STACK_REDIS_PORT "$redis_port" ""
		fi
	fi
	return "$busy"
}

usage() {
	cat <<'USAGE'
usage: deploy/local/stack.sh up|env|down|check-ports|chromium|promtool|haproxy
  up     start the local PostgreSQL and Redis if they are not running
  env    print export lines for the tools: eval "$(deploy/local/stack.sh env)"
  env importctl  only the variables importctl reads (what make -s env prints)
  down   stop both (their data stays in .local/)
  check-ports  fail when a port `make run` listens on is taken, naming
         the variable that moves it
  chromium  install Debian's chromium for the migration page's browser test
  promtool  install Debian's prometheus package for the alerting rules' test
  haproxy   install Debian's haproxy for make scale
USAGE
}

case "${1:-}" in
"" | -h | --help | help)
	usage
	[[ -n "${1:-}" ]] || exit 2
	;;
up)
	if external; then exit 0; fi
	pg_up
	redis_up
	;;
env) print_env "${2:-}" ;;
down) down ;;
check-ports) check_ports ;;
chromium) chromium_up ;;
promtool) promtool_up ;;
haproxy) haproxy_up ;;
*)
	usage >&2
	exit 2
	;;
esac
