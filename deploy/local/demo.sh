#!/usr/bin/env bash
# Provisions the demo data of a local service with importctl and prints how to
# use it: an API key, the dashboard's address and login, and a curl example
# that obtains a token and validates the example account.
#
#   deploy/local/demo.sh       (run by `make run`, after `importd migrate`)
#
# Idempotent: what exists already (looked up with `importctl ... list --json`)
# is left alone. The API key (named demo-<UTC time>-<random hex>) is kept in
# .local/demo_api_key, mode 600, alone on one line (KEY=$(cat .local/demo_api_key)),
# and reused by later runs while it is active; see demo_key below.
#
# Reads DATABASE_URL (required), and HTTP_ADDR, MONITORING_USER and
# MONITORING_PASSWORD for what it prints. IMPORTCTL overrides the binary
# (default bin/importctl), DEMO_KEY_FILE the key's file.
#
# The demo supplier, product and tariffs match the example account in
# jobs/account/testdata/account.json: supplier DEMO (GB), product DEMO-ELEC.
# Its tariffs are the tariff codes the example account uses, read from the
# file when it is there, else E-1R-DEMO-STD and E-1R-DEMO-ECO.
set -euo pipefail

here=$(cd "$(dirname "$0")/../.." && pwd)
importctl=${IMPORTCTL:-$here/bin/importctl}
account_json=$here/jobs/account/testdata/account.json
supplier=DEMO
country=GB
team="Demo Operations"
product=DEMO-ELEC
default_tariffs=(E-1R-DEMO-STD E-1R-DEMO-ECO)

log() { echo "demo: $*" >&2; }
die() { echo "demo: error: $*" >&2; exit 1; }

[[ -n "${DATABASE_URL:-}" ]] || die "DATABASE_URL is not set (run through \`make run\`, or eval \"\$(deploy/local/stack.sh env)\" first)"
[[ -x "$importctl" ]] || die "$importctl is missing; run \`make build\`"

have_jq() { command -v jq >/dev/null 2>&1; }

# unique_suffix prints the UTC time and 8 random hex digits. The time alone
# collides when two names are made within one second (a revoked key replaced
# at once, or two runs in a row after a database reset); the random part does
# not, and the time still orders names by age for a reader.
unique_suffix() {
	printf '%s-%s' "$(date -u +%Y%m%dT%H%M%SZ)" "$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')"
}

# demo_pdf prints a one-page PDF that says "Welcome letter (demo)", with a
# cross-reference table whose offsets are counted, so that PDF readers open
# it without repair.
demo_pdf() {
	local objs=(
		'<< /Type /Catalog /Pages 2 0 R >>'
		'<< /Type /Pages /Kids [3 0 R] /Count 1 >>'
		'<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>'
		'<< /Length 52 >>
stream
BT /F1 18 Tf 72 760 Td (Welcome letter (demo)) Tj ET
endstream'
		'<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>'
	)
	local out='%PDF-1.4'$'\n' offsets=() i
	for i in "${!objs[@]}"; do
		offsets+=("${#out}")
		out+="$((i + 1)) 0 obj"$'\n'"${objs[i]}"$'\n'"endobj"$'\n'
	done
	local xref=${#out}
	out+="xref"$'\n'"0 $((${#objs[@]} + 1))"$'\n'"0000000000 65535 f "$'\n'
	for i in "${offsets[@]}"; do
		out+=$(printf '%010d 00000 n ' "$i")$'\n'
	done
	out+="trailer"$'\n'"<< /Size $((${#objs[@]} + 1)) /Root 1 0 R >>"$'\n'"startxref"$'\n'"$xref"$'\n'"%%EOF"$'\n'
	printf '%s' "$out"
}

# listed KIND FIELD VALUE: whether `importctl KIND list --json` has an object
# whose FIELD is VALUE. Without jq, a match of "FIELD": "VALUE" in the output
# does (the values looked up here need no JSON escaping).
listed() {
	local out
	out=$("$importctl" --json "$1" list) || die "importctl $1 list failed"
	if have_jq; then
		jq -e --arg f "$2" --arg v "$3" 'any((. // [])[]; .[$f] == $v)' <<<"$out" >/dev/null
	else
		grep -Eq "\"$2\": *\"$3\"" <<<"$out"
	fi
}

# ensure KIND FIELD VALUE CREATE-ARGS...: runs `importctl KIND create
# CREATE-ARGS...` unless the list already has it. A create that loses a race
# with another one ("already exists") counts as done.
ensure() {
	local kind=$1 field=$2 value=$3 out
	shift 3
	if listed "$kind" "$field" "$value"; then
		log "$kind $value exists"
		return 0
	fi
	if out=$("$importctl" "$kind" create "$@" 2>&1); then
		log "$out"
	elif [[ $out == *"already exists"* ]]; then
		log "$kind $value exists"
	else
		die "importctl $kind create $*: $out"
	fi
}

# The example account's tariff codes, in order of first use.
tariffs=()
if [[ -r $account_json ]]; then
	if have_jq; then
		mapfile -t tariffs < <(jq -r '[.. | objects | .tariff_code? | strings] | reduce .[] as $t ([]; if index([$t]) then . else . + [$t] end) | .[]' "$account_json")
	else
		mapfile -t tariffs < <(grep -o '"tariff_code": *"[^"]*"' "$account_json" | sed 's/.*"\([^"]*\)"$/\1/' | awk '!seen[$0]++')
	fi
fi
if ((${#tariffs[@]} == 0)); then
	tariffs=("${default_tariffs[@]}")
fi
tariff_args=()
for t in "${tariffs[@]}"; do
	tariff_args+=(--tariff "$t")
done

ensure supplier code "$supplier" "$supplier" --country "$country" --status Ongoing
ensure team name "$team" "$team"
ensure product code "$product" "$product" "${tariff_args[@]}"

# A product made by an earlier demo may lack tariffs the example account uses
# now; tariff codes are unique across products, so the missing ones go into a
# product of their own.
products_json=$("$importctl" --json product list)
missing=()
for t in "${tariffs[@]}"; do
	grep -q "\"$t\"" <<<"$products_json" || missing+=(--tariff "$t")
done
if ((${#missing[@]} > 0)); then
	out=$("$importctl" product create "$product-$(unique_suffix)" "${missing[@]}" 2>&1) || die "importctl product create: $out"
	log "$out"
fi

# The example account belongs to a business through contract BC-2024-0042.
# Businesses come through E1, which needs the running service; the demo
# writes the same rows directly, once, so that the printed E3 example passes.
if command -v psql >/dev/null 2>&1; then
	if psql "$DATABASE_URL" -qAt -v ON_ERROR_STOP=1 >/dev/null <<'SQL'; then
WITH s AS (SELECT id FROM import_suppliers WHERE code = 'DEMO'),
b AS (
	INSERT INTO businesses (supplier_id, external_business_identifier, business_type, company_number, company_name)
	SELECT id, 'DEMO-BIZ-1', 'LTD', '01234567', 'Hughes Demo Ltd' FROM s
	ON CONFLICT DO NOTHING RETURNING id, supplier_id)
INSERT INTO business_contracts (business_id, supplier_id, identifier, valid_from_date, signed_at_date)
SELECT id, supplier_id, 'BC-2024-0042', '2024-01-01', '2023-12-15' FROM b
ON CONFLICT DO NOTHING;
SQL
		log "business contract BC-2024-0042 is in place"
	else
		log "could not create the demo business; create it with E1 (contract BC-2024-0042)"
	fi
else
	log "psql is not installed; create the business of the example account with E1 (contract BC-2024-0042)"
fi

# The example account's note names letters/A-00012345/welcome-2019.pdf;
# E5 refuses a missing document when the supplier requires documents, so
# the demo places a small generated PDF there (replaced on every run). Needs
# DOCUMENTS_URL, which `make run` sets.
demo_document=letters/A-00012345/welcome-2019.pdf
if [[ -n "${DOCUMENTS_URL:-}" ]]; then
	pdf=$(mktemp)
	trap 'rm -f "$pdf"' EXIT
	demo_pdf >"$pdf"
	out=$("$importctl" document put "$supplier" "$demo_document" "$pdf" 2>&1) || die "importctl document put $demo_document: $out"
	log "$out"
else
	log "DOCUMENTS_URL is not set; not uploading $demo_document (E5 refuses the example account when the supplier requires documents)"
fi

# The payment vendor DEMO_PAY (jobs/payment/PROTOCOL.md), served by
# `importctl vendor-sim` from deploy/local/vendor-instructions.json. The
# simulator starts in the background unless something answers at its address
# already. --exit-with-pid ties it to this script's parent: `make run` execs
# importd in that process, so the simulator stops with the service.
vendor=DEMO_PAY
vendor_addr=${VENDOR_SIM_ADDR:-127.0.0.1:18090}
vendor_file=$here/deploy/local/vendor-instructions.json
if listed vendor name "$vendor"; then
	log "vendor $vendor exists"
elif out=$("$importctl" vendor add "$vendor" --url "http://$vendor_addr" 2>&1); then
	log "$out"
elif [[ $out == *"already exists"* ]]; then
	log "vendor $vendor exists"
else
	die "importctl vendor add $vendor: $out"
fi
if (exec 3<>"/dev/tcp/${vendor_addr%:*}/${vendor_addr##*:}") 2>/dev/null; then
	log "something answers at $vendor_addr already; not starting the vendor simulator"
else
	mkdir -p "$here/.local"
	"$importctl" vendor-sim --addr "$vendor_addr" --file "$vendor_file" --exit-with-pid "$PPID" \
		>>"$here/.local/vendor-sim.log" 2>&1 </dev/null &
	log "vendor simulator started on http://$vendor_addr (log: .local/vendor-sim.log)"
fi

# key_name KEY: prints the name of the active key whose prefix is KEY's, or
# nothing when there is none (the key was revoked, or belongs to a database
# since reset).
key_name() {
	local prefix=${1:0:12} out
	if have_jq; then
		out=$("$importctl" --json apikey list) || die "importctl apikey list failed"
		jq -r --arg p "$prefix" 'first((. // [])[] | select(.prefix == $p and .revoked_at == null) | .name) // empty' <<<"$out"
	else
		out=$("$importctl" apikey list) || die "importctl apikey list failed"
		awk -v p="$prefix…" '$NF == "active" { for (i = 2; i < NF; i++) if ($i == p) { print $1; exit } }' <<<"$out"
	fi
}

# write_key_file writes the key alone on one line, mode 600, so that
# KEY=$(cat .local/demo_api_key) is the key.
write_key_file() {
	mkdir -p "$(dirname "$key_file")"
	(umask 077 && printf '%s\n' "$key" >"$key_file.tmp") && mv -f "$key_file.tmp" "$key_file"
	chmod 600 "$key_file"
}

# demo_key sets key_name and key. Every run used to create a key, leaving
# one more active key behind each time; now the key of the last run is
# reused while it is active. When the file is missing, or its key was revoked
# or belongs to a database since reset, a new key replaces it. The file holds
# the key alone; the name is looked up by the key's prefix. (A file of an
# earlier demo held the name on a first line: its last line is the key, and
# the file is rewritten with the key alone.)
key_file=${DEMO_KEY_FILE:-$here/.local/demo_api_key}
demo_key() {
	local old_key="" lines=0
	if [[ -s $key_file ]]; then
		old_key=$(awk 'NF { k = $0 } END { print k }' "$key_file")
		lines=$(awk 'NF { n++ } END { print n + 0 }' "$key_file")
		if [[ -n $old_key ]]; then
			key_name=$(key_name "$old_key")
			if [[ -n $key_name ]]; then
				key=$old_key
				((lines == 1)) || write_key_file
				log "API key $key_name reused (from $key_file)"
				return 0
			fi
		fi
	fi
	key_name="demo-$(unique_suffix)"
	key=$("$importctl" apikey create "$key_name" --supplier "$supplier") || die "importctl apikey create $key_name failed"
	[[ -n $key ]] || die "importctl apikey create $key_name printed no key"
	write_key_file
	log "API key $key_name created (kept in $key_file)"
}
demo_key

addr=${HTTP_ADDR:-127.0.0.1:8080}
case $addr in
0.0.0.0:* | :*) addr=127.0.0.1:${addr##*:} ;;
esac
base=http://$addr

if have_jq; then
	extract='jq -r .data.obtainServiceToken.token'
else
	extract="sed -n 's/.*\"token\": *\"\\([^\"]*\\)\".*/\\1/p'"
fi

cat <<EOF

================================================================
 Bulk import service (local demo)
================================================================
 API            $base
 API key        $key
                (named $key_name, limited to supplier $supplier; kept alone on
                one line in ${key_file/#"$here"\//}, mode 600, and reused by the
                next run: KEY=\$(cat ${key_file/#"$here"\//}))
EOF
if [[ -n "${MONITORING_USER:-}" ]]; then
	cat <<EOF
 Dashboard      $base/monitoring/
                user ${MONITORING_USER}, password ${MONITORING_PASSWORD:-}
 Progress page  $base/migration/ (each supplier's migration; the same login,
                or any user name with an API key as the password)
EOF
fi
cat <<EOF
 Demo data      supplier $supplier ($country), team "$team",
                product $product with tariffs ${tariffs[*]}
 Payment vendor $vendor (simulator at http://$vendor_addr): references
                DEMO-CARD-0001, DEMO-CARD-0002 (CARD), DEMO-DD-0001 (DIRECT_DEBIT)

 Obtain a token, then validate the example account (E3):

TOKEN=\$(curl -sS -X POST '$base/v1/graphql/' \\
  -H 'Content-Type: application/json' \\
  -d '{"query":"mutation { obtainServiceToken(input: {APIKey: \"$key\"}) { token } }"}' \\
  | $extract)

curl -sS -X POST '$base/v1/data-import/validate-account/' \\
  -H "Authorization: Token \$TOKEN" \\
  -H 'Content-Type: application/json' \\
  --data-binary @'$account_json'

 Every endpoint in order, to an imported account: README.md, "Day one",
 with BASE=$base KEY=$key
 API page       $base/v1/data-import/docs/
================================================================

EOF
