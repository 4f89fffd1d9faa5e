#!/usr/bin/env bash
# How tests/fixtures/store-0.1.0.redb and store-0.1.0.json were made
# (documentation; no test runs this script).
#
# Builds release 0.1.0 (commit 8c1bd7e) in a temporary git worktree, runs
# its agent against the local Docker Engine on a node under /tmp/fixture-node
# until the store holds every kind of record, leaves one applied record
# Pending by crashing a recreate (STEAD_CRASH_AT=recreate:after-remove), and
# writes:
#   tests/fixtures/store-0.1.0.redb   the agent's own store file, byte for byte
#   tests/fixtures/store-0.1.0.json   every record in it, as the 0.1.0 code
#                                     reads them (examples/dump_store.rs below,
#                                     run on a copy of the file)
#   tests/fixtures/store-0.1.0/       the config, intention files and API
#                                     bodies used
# A later test opens the .redb with the new code and compares with the .json.
# The file was last written by an aborted process, so redb repairs it on its
# first open (which writes): open a copy, never the fixture itself.
# A run gives a different file (times, container IDs); the one committed is
# the output of one run of this script.
#
# Needs: a Docker Engine (scripts/engine.sh starts one), cargo, curl, jq.
# Env:
#   CARGO_TARGET_DIR     reuse a target dir (default: a fresh one, a full build)
#   STEAD_FIXTURE_OUT    where to write (default tests/fixtures)
#   STEAD_FIXTURE_NODE   the node's directory (default /tmp/fixture-node;
#                        its paths are recorded in the store, so keep it fixed)
#   STEAD_FIXTURE_PORT   host port the sensor module publishes (default 18998)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=store-fixture.sh
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

COMMIT=8c1bd7e
REPO="$PWD"
OUT="${STEAD_FIXTURE_OUT:-$REPO/tests/fixtures}"
NODE="${STEAD_FIXTURE_NODE:-/tmp/fixture-node}"
PORT="${STEAD_FIXTURE_PORT:-18998}"
NODE_ID=fixture-node

command -v jq >/dev/null && command -v curl >/dev/null || apt_install jq curl
case "$NODE" in /*) ;; *) die "STEAD_FIXTURE_NODE must be absolute: $NODE" ;; esac
if [ -e "$NODE" ] && [ ! -f "$NODE/stead.toml" ]; then
    die "$NODE exists and is not a fixture node; remove it or set STEAD_FIXTURE_NODE"
fi

work="$(mktemp -d /tmp/stead-fixture.XXXXXX)"
src="$work/src"
pid=""
containers() { docker ps -aq --filter "label=stead.managed-by=$NODE_ID"; }
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    containers | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker rm -f stead-squatter >/dev/null 2>&1 || true
    git -C "$REPO" worktree remove --force "$src" >/dev/null 2>&1 || true
    git -C "$REPO" worktree prune >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# --- 0.1.0, built -----------------------------------------------------------

say "worktree of $COMMIT in $src"
git -C "$REPO" worktree add --detach "$src" "$COMMIT" >/dev/null 2>&1 \
    || die "git worktree add $src $COMMIT failed"
"$src/scripts/engine.sh"
"$src/scripts/test-images.sh" >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$work/target}"
say "building stead $COMMIT (target dir $CARGO_TARGET_DIR)"
(cd "$src" && cargo build --release --locked --bin stead) >&2
# Copied aside before the example's build, which unifies dev-dependency features.
cp "$CARGO_TARGET_DIR/release/stead" "$work/stead"
STEAD="$work/stead"
"$STEAD" --version | grep -q "stead 0.1.0 (commit ${COMMIT}" || die "not 0.1.0 at $COMMIT: $("$STEAD" --version)"

cat >"$src/examples/dump_store.rs" <<'RUST'
//! Prints every record of a stead store as one JSON document, as this
//! version of the code reads them. Usage: dump_store STORE_FILE
//! Opens the file for writing (Store::open takes a write transaction, and
//! redb may repair a file left by a killed process): point it at a copy.

use std::path::PathBuf;

use redb::{ReadableDatabase, TableDefinition};
use serde_json::{Map, Value as J, json};
use stead::store::{Source, Store};

const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

fn main() -> anyhow::Result<()> {
    let path = PathBuf::from(
        std::env::args_os()
            .nth(1)
            .ok_or_else(|| anyhow::anyhow!("usage: dump_store STORE_FILE (a copy)"))?,
    );
    let store = Store::open(&path)?;

    let mut intentions = Map::new();
    let mut overlays = Map::new();
    for (name, entry) in store.entries()? {
        let r = entry.record.expect("entries() holds stored intentions");
        let source = match &r.source {
            Source::File(p) => json!({"kind": "file", "path": p}),
            Source::Api => json!({"kind": "api"}),
            Source::Plane => json!({"kind": "plane"}),
        };
        intentions.insert(
            name.to_string(),
            json!({"source": source, "revision": r.revision, "intention": r.intention.to_json()}),
        );
        if !entry.overlay.is_empty() {
            overlays.insert(
                name.to_string(),
                J::Object(
                    entry
                        .overlay
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_json()))
                        .collect(),
                ),
            );
        }
    }
    let mut applied = Map::new();
    for (name, r) in store.all_applied()? {
        applied.insert(name, serde_json::to_value(&r)?);
    }
    let mut observed = Map::new();
    for (name, r) in store.all_observed()? {
        observed.insert(name, serde_json::to_value(&r)?);
    }
    let events = store
        .events_since(0, usize::MAX)?
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<_>, _>>()?;
    drop(store);

    let db = redb::Database::open(&path)?;
    let tx = db.begin_read()?;
    let schema = tx.open_table(META)?.get("schema")?.map(|v| v.value());

    let doc = json!({
        "schema": schema,
        "intentions": intentions,
        "overlays": overlays,
        "applied": applied,
        "observed": observed,
        "events": events,
    });
    println!("{}", serde_json::to_string_pretty(&doc)?);
    Ok(())
}
RUST
say "building examples/dump_store.rs against $COMMIT"
(cd "$src" && cargo build --release --locked --example dump_store) >&2
DUMP="$CARGO_TARGET_DIR/release/examples/dump_store"

# --- the node ----------------------------------------------------------------

containers | xargs -r docker rm -f >/dev/null
docker rm -f stead-squatter >/dev/null 2>&1 || true
rm -rf "$NODE"
mkdir -p "$NODE/intentions.d" "$NODE/host/state" "$NODE/host/rules" "$work/record/api"
if ss -ltnH "( sport = :$PORT )" 2>/dev/null | grep -q .; then die "port $PORT is taken; set STEAD_FIXTURE_PORT"; fi
H="$NODE/host"
I="$NODE/intentions.d"
CONFIG="$NODE/stead.toml"

cat >"$CONFIG" <<TOML
node_id = "$NODE_ID"
data_dir = "data"
intentions_dir = "intentions.d"
api_listen = "127.0.0.1:0"
heartbeat = "1h"
settle_window = "1s"
TOML
cp "$CONFIG" "$work/record/stead.toml"

printf '# sensor secrets\nDB_PASSWORD=fixture-secret\nLOG_LEVEL=info\n' >"$H/sensor.env"
printf 'model v1\n' >"$H/model.bin"
printf 'sensor state\n' >"$H/state/counter"
printf 'level >= warn\n' >"$H/rules/levels.rules"
printf 'drop debug\n' >"$H/rules/filters.rules"

# Idles, and exits promptly on SIGTERM (a shell as PID 1 ignores it otherwise).
IDLE="trap 'exit 0' TERM; sleep 1000000 & wait"
# Writes an intention file atomically (a hidden temp file is ignored) and
# keeps a copy for the record, as $2 (default: its own name).
intention() {
    local file="$1" keep="${2:-$1}"
    cat >"$I/.$file.tmp"
    cp "$I/.$file.tmp" "$work/record/$keep"
    mv "$I/.$file.tmp" "$I/$file"
}

intention sensor.toml <<TOML
name = "sensor"
image = "stead-test/busybox:1"
command = ["sh", "-c", "cat /etc/sensor/config.json; $IDLE"]
env = { MODE = "prod" }
env_files = ["$H/sensor.env"]
restart = "unless-stopped"
on_drift = "recreate"
ports = ["127.0.0.1:$PORT:80/tcp"]

[config]
path = "/etc/sensor/config.json"
format = "json"
defaults = { poll_ms = 1000, threshold = 0.75, enabled = true, tags = ["edge", "fixture"], database = { url = "", pool = { size = 4, timeout_s = 2.5 } } }

[settings]
"database.url" = "postgresql://db:5432/x"
"database.pool.size" = 8

[[files]]
path = "/etc/sensor/banner.txt"
content = "hello from the 0.1.0 fixture\n"

[[mounts]]
source = "$H/model.bin"
target = "/model.bin"
read_only = true

[[mounts]]
source = "$H/state"
target = "/var/lib/sensor"
read_only = false
TOML

intention logger.toml <<TOML
name = "logger"
image = "stead-test/busybox:1"
command = ["sh", "-c", "cat /etc/logger/logger.toml; $IDLE"]
restart = "always"
on_drift = "report"

[config]
path = "/etc/logger/logger.toml"
format = "toml"
defaults = { level = "info", retention_days = 7, outputs = { file = { path = "/var/log/logger.log", rotate = true } } }

[settings]
level = "warn"

[[mounts]]
source = "$H/rules"
target = "/etc/logger/rules"
read_only = true
TOML

intention crashy.toml crashy.v1.toml <<TOML
name = "crashy"
image = "stead-test/busybox:1"
command = ["sh", "-c", "echo crashy \$VERSION; $IDLE"]
env = { VERSION = "1" }
restart = "on-failure"
TOML

# --- the agent, and what it is asked --------------------------------------

say "agent: $("$STEAD" --version)"
STEAD_LOG=info "$STEAD" run --config "$CONFIG" >"$work/agent.log" 2>&1 &
pid=$!

# Waits up to 60 s for "$@" to succeed.
wait_for() {
    local what="$1" i
    shift
    for i in $(seq 1 600); do
        if "$@"; then return 0; fi
        kill -0 "$pid" 2>/dev/null || { tail -n 30 "$work/agent.log" >&2; die "the agent died"; }
        sleep 0.1
    done
    tail -n 30 "$work/agent.log" >&2
    die "timed out waiting for $what"
}
wait_for "the API" test -s "$NODE/data/api-addr" -a -s "$NODE/data/api-token"
ADDR="http://$(cat "$NODE/data/api-addr")"
TOKEN="$(cat "$NODE/data/api-token")"
wait_for "/healthz" curl -fsS -o /dev/null "$ADDR/healthz"

# Events of kind $1 for module $2 ("" for none, "*" for any) so far.
events() {
    curl -fsS "$ADDR/v1/events?limit=1000" \
        | jq --arg k "$1" --arg m "$2" \
            '[.events[] | select(.kind == $k and ($m == "*" or (.module // "") == $m))] | length'
}
has_events() { [ "$(events "$1" "$2")" -ge "$3" ]; }
wait_event() { wait_for "$3 '$1' event(s) of ${2:-the node}" has_events "$1" "$2" "$3"; }
running() {
    [ "$(docker ps --filter "label=stead.managed-by=$NODE_ID" --filter "label=stead.module=$1" --format '{{.State}}')" = running ]
}
wait_running() { wait_for "$1 running" running "$1"; }
# A write through the API, with the body kept for the record.
api() {
    local method="$1" path="$2" keep="$3"
    cat >"$work/record/api/$keep"
    curl -fsS -X "$method" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        --data-binary @"$work/record/api/$keep" "$ADDR$path" >&2
    echo >&2
}
# Wakes the agent for a pass (a hidden file in the intentions directory).
kick() { date +%s%N >"$I/.kick"; }

wait_event engine "" 1
for m in sensor logger crashy; do wait_event created "$m" 1; wait_running "$m"; done

say "api-mod: PUT, then PATCH"
api PUT /v1/intentions/api-mod api-mod.put.json <<JSON
{
  "name": "api-mod",
  "image": "stead-test/busybox:2",
  "command": ["sh", "-c", "cat /etc/api-mod/app.env; $IDLE"],
  "env": { "ROLE": "api" },
  "restart": "always",
  "config": {
    "path": "/etc/api-mod/app.env",
    "format": "env",
    "defaults": { "port": 8080, "log": { "level": "info", "json": false } }
  },
  "settings": { "log.level": "debug" },
  "files": [ { "path": "/etc/api-mod/motd", "content": "stated through the API\n" } ]
}
JSON
wait_event created api-mod 1
wait_running api-mod
api PATCH /v1/intentions/api-mod/settings api-mod.patch.json <<'JSON'
{ "log.level": "warn", "peer.url": "http://10.0.0.2:8080" }
JSON
wait_event recreated api-mod 1
wait_running api-mod

say "sensor: a settings overlay through the API, then its env file rewritten"
api PATCH /v1/intentions/sensor/settings sensor.patch.json <<'JSON'
{ "database.url": "postgresql://db2:5432/x", "limits.max_rows": 500 }
JSON
wait_event recreated sensor 1
wait_running sensor
sleep 1.1 # a new second: the digest cache sees the rewrite whatever its stat
printf '# sensor secrets, rotated\nDB_PASSWORD=rotated-secret-2\nLOG_LEVEL=info\n' >"$H/sensor.env"
wait_event recreated sensor 2
wait_running sensor

say "logger: a read-only mount's content moves (on_drift = report)"
printf 'level >= error\n' >"$H/rules/levels.rules"
wait_event drift logger 1

say "broken: a refused intention file"
intention broken.toml <<'TOML'
name = "broken"
image = "stead-test/busybox:1"
restart = "sometimes"
TOML
wait_event rejected "*" 1
rm "$I/broken.toml"

say "squatter: a container this node does not manage holds the name"
docker create --name stead-squatter stead-test/busybox:1 true >/dev/null
intention squatter.toml <<'TOML'
name = "squatter"
image = "stead-test/busybox:1"
TOML
wait_event conflict squatter 1
rm "$I/squatter.toml"
wait_event intention squatter 2
docker rm -f stead-squatter >/dev/null

say "temp: held for a missing env file, created once it exists, then removed"
intention temp.toml <<TOML
name = "temp"
image = "stead-test/busybox:2"
command = ["sh", "-c", "$IDLE"]
env_files = ["$H/temp.env"]
TOML
wait_event error temp 1
printf 'TEMP=1\n' >"$H/temp.env"
kick
wait_event created temp 1
wait_running temp
rm "$I/temp.toml"
wait_event removed temp 1

say "stopping the agent"
kill -TERM "$pid"
rc=0
wait "$pid" || rc=$?
pid=""
[ "$rc" -eq 0 ] || { tail -n 30 "$work/agent.log" >&2; die "the agent exited $rc on SIGTERM"; }
rm -f "$I/.kick"

# --- a quiet pass (observed records up to date), then the crash ------------

# A fresh process: no crash-loop backoff remembered from the recreates above.
say "sensor: stopped behind the agent's back; a pass starts it again"
docker stop -t 5 stead-sensor >/dev/null
"$STEAD" run --once --config "$CONFIG" >"$work/once.out" || true
cat "$work/once.out" >&2
grep -Eq '^sensor +started' "$work/once.out" || die "sensor was not started"
running sensor || die "sensor is not running"

say "one quiet pass (every observed record up to date)"
"$STEAD" run --once --config "$CONFIG" >&2 || true

say "crashy: changed, and the recreate killed after the old container is removed"
intention crashy.toml crashy.v2.toml <<TOML
name = "crashy"
image = "stead-test/busybox:2"
command = ["sh", "-c", "echo crashy \$VERSION; $IDLE"]
env = { VERSION = "2" }
restart = "on-failure"
TOML
rc=0
STEAD_CRASH_AT=recreate:after-remove "$STEAD" run --once --config "$CONFIG" \
    >"$work/crash.out" 2>"$work/crash.err" || rc=$?
cat "$work/crash.out" "$work/crash.err" >&2
[ "$rc" -ne 0 ] && grep -q 'STEAD_CRASH_AT=recreate:after-remove: aborting' "$work/crash.err" \
    || die "the agent did not die at recreate:after-remove (exit $rc)"
[ -z "$(docker ps -aq --filter "label=stead.managed-by=$NODE_ID" --filter label=stead.module=crashy)" ] \
    || die "crashy still has a container"
# No pass after this one: crashy's applied record stays Pending.

containers | xargs -r docker rm -f >/dev/null

# --- the dump, and the fixture -----------------------------------------------

STORE="$NODE/data/stead.redb"
before="$(sha256sum <"$STORE")"
cp "$STORE" "$work/copy.redb"
"$DUMP" "$work/copy.redb" >"$work/dump.json"
[ "$(sha256sum <"$STORE")" = "$before" ] || die "the store changed while being dumped"

# What the store holds. temp's observed record is there because 0.1.0, in the
# pass that removes a module's container, forgets its records and then writes
# the observed records from the list it made before acting: a removed
# module keeps a stale observed record.
jq -e '
  .schema == 1
  and (.intentions | keys) == ["api-mod", "crashy", "logger", "sensor"]
  and .intentions["api-mod"].source.kind == "api" and .intentions["api-mod"].revision == 2
  and .intentions.sensor.source.kind == "file" and (.overlays.sensor | length) > 0
  and .applied.crashy.state == "Pending" and .applied.crashy.container_id == null
  and ([.applied[] | select(.state == "Applied")] | length) == 3
  and (.observed | keys) == ["api-mod", "crashy", "logger", "sensor", "temp"]
  and ([.events[].kind] | unique) == (["created", "recreated", "started", "removed", "drift",
        "conflict", "rejected", "intention", "error", "engine"] | sort)
' "$work/dump.json" >/dev/null || {
    cp "$work/dump.json" /tmp/store-fixture.failed.json
    die "the dump is not what was expected: /tmp/store-fixture.failed.json"
}

mkdir -p "$OUT"
cp "$STORE" "$OUT/store-0.1.0.redb"
cp "$work/dump.json" "$OUT/store-0.1.0.json"
rm -rf "$OUT/store-0.1.0"
cp -r "$work/record" "$OUT/store-0.1.0"
say "wrote $OUT/store-0.1.0.redb ($(stat -c %s "$OUT/store-0.1.0.redb") bytes), store-0.1.0.json ($(jq '.events | length' "$work/dump.json") events), store-0.1.0/"
jq -r '.intentions | to_entries[] | "  \(.key): \(.value.source.kind) revision \(.value.revision)"' "$work/dump.json" >&2
jq -r '.applied | to_entries[] | "  \(.key): applied \(.value.state)"' "$work/dump.json" >&2
