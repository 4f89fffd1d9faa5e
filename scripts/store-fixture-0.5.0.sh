#!/usr/bin/env bash
# How tests/fixtures/store-0.5.0.redb and tests/fixtures/store-0.5.0/ were
# made (documentation; no test runs this script).
#
# Builds release 0.5.0 (commit e813dc5) in a temporary git worktree and runs
# its agent on a node under /tmp/fixture-050 against the local Docker Engine,
# a registry (Debian's docker-registry) on 127.0.0.1:18995 and a central
# plane (Debian's nginx) on loopback, until the store holds a record of
# every kind schema 7 has:
#   intentions   from files (tests/fixtures/store-0.5.0/intentions: every
#                runtime field, a live-reloaded config, a module with an
#                [update] section, a plain one), from the API (api/*.json)
#                and from the plane (plane-payload.json, signed as revision 5)
#   overlays     the API module's settings PATCH
#   applied, observed, events   of all of them
#   live         live.toml's config swapped in place (v "one" -> "two")
#   reloads, updates   `stead reload app`: 1.0.0 -> 1.1.0, done
#   plane        the held document, its ETag, the contact and the report
# and writes:
#   tests/fixtures/store-0.5.0.redb            the agent's store, byte for byte
#   tests/fixtures/store-0.5.0/check-0.5.0.txt `stead check` of the intentions
#   tests/fixtures/store-0.5.0/desired.json    the signed document it holds
# tests/upgrade.rs opens a copy with the new code and reads every kind back.
#
# Needs: a Docker Engine with the test images (scripts/engine.sh,
# scripts/test-images.sh), docker-registry, nginx, cargo, curl, jq.
# Env:
#   CARGO_TARGET_DIR     reuse a target dir (default: a fresh one, a full build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=store-fixture-0.5.0.sh
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

COMMIT=e813dc5
REPO="$PWD"
FIX="$REPO/tests/fixtures/store-0.5.0"
NODE=/tmp/fixture-050
NODE_ID=fixture-050
REGISTRY=127.0.0.1:18995
[ ! -e "$NODE" ] || die "$NODE exists; remove it first"
for t in docker-registry nginx jq curl; do command -v "$t" >/dev/null || [ -x "/usr/sbin/$t" ] || die "needs $t"; done

work="$(mktemp -d /tmp/stead-fixture.XXXXXX)"
src="$work/src"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    docker ps -aq --filter "label=stead.managed-by=$NODE_ID" | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker volume rm fixture-050-data >/dev/null 2>&1 || true
    docker network rm fixture-050-net >/dev/null 2>&1 || true
    git -C "$REPO" worktree remove --force "$src" >/dev/null 2>&1 || true
    rm -rf "$work" "$NODE"
}
trap cleanup EXIT

git -C "$REPO" worktree add --detach "$src" "$COMMIT" >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$work/target}"
(cd "$src" && cargo build --release --locked --bin stead) >&2
stead="$CARGO_TARGET_DIR/release/stead"
"$stead" --version | grep -q '^stead 0.5.0' || die "not 0.5.0: $("$stead" --version)"

# Waits up to 120 s for "$@" to succeed.
wait_for() {
    local what="$1" i
    shift
    for i in $(seq 1 1200); do
        if "$@"; then return 0; fi
        sleep 0.1
    done
    tail -n 40 "$NODE/agent.log" >&2 || true
    die "timed out waiting for $what"
}

# --- the registry: fixture/app 1.0.0 and 1.1.0 -----------------------------
mkdir -p "$work/registry"
cat >"$work/registry/config.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: $work/registry/storage
http:
  addr: $REGISTRY
EOF
docker-registry serve "$work/registry/config.yml" >"$work/registry/log" 2>&1 &
pids+=($!)
wait_for "the registry" curl -fsS -o /dev/null "http://$REGISTRY/v2/"
for v in 1.0.0 1.1.0; do
    tmp="$(docker create stead-test/busybox:1 true)"
    docker commit --change "LABEL org.example.version=$v" "$tmp" "$REGISTRY/fixture/app:$v" >/dev/null
    docker rm "$tmp" >/dev/null
    docker push -q "$REGISTRY/fixture/app:$v" >/dev/null
    docker rmi "$REGISTRY/fixture/app:$v" >/dev/null
done

# --- the plane: one signed document ----------------------------------------
plane="$work/plane"
mkdir -p "$plane/root/nodes/$NODE_ID" "$plane/tmp"
port=18994
cat >"$plane/nginx.conf" <<EOF
user root root;
worker_processes 1;
daemon off;
pid "$plane/nginx.pid";
error_log "$plane/error.log" info;
events { worker_connections 64; }
http {
    types { application/json json; }
    client_body_temp_path "$plane/tmp";
    server {
        listen 127.0.0.1:$port;
        root "$plane/root";
        location ~ ^/nodes/[^/]+/status\.json\$ {
            dav_methods PUT;
            create_full_put_path on;
            limit_except GET PUT { deny all; }
        }
        location / { limit_except GET { deny all; } }
    }
}
EOF
/usr/sbin/nginx -p "$plane/" -c "$plane/nginx.conf" -e "$plane/error.log" &
pids+=($!)
"$stead" plane keygen --out "$work/plane.key" >"$work/keygen.out"
pub="$(cat "$work/plane.key.pub")"
"$stead" plane sign --key "$work/plane.key" --node "$NODE_ID" --revision 5 --expires-in 3650d \
    --in "$FIX/plane-payload.json" --out "$plane/root/nodes/$NODE_ID/desired.json"
wait_for "the plane" curl -fsS -o /dev/null "http://127.0.0.1:$port/nodes/$NODE_ID/desired.json"

# --- the node ----------------------------------------------------------------
mkdir -p "$NODE/intentions"
cat >"$NODE/stead.toml" <<EOF
node_id = "$NODE_ID"
data_dir = "$NODE/data"
intentions_dir = "$NODE/intentions"
api_listen = "127.0.0.1:0"
heartbeat = "2s"
settle_window = "1s"

[plane]
url = "http://127.0.0.1:$port"
trusted_keys = ["$pub"]
EOF
cp "$FIX"/intentions/*.toml "$NODE/intentions/"
"$stead" check --config "$NODE/stead.toml" >"$FIX/check-0.5.0.txt"
sed -i 's/v = "two"/v = "one"/' "$NODE/intentions/live.toml"

STEAD_LOG=info "$stead" run --config "$NODE/stead.toml" >"$NODE/agent.log" 2>&1 &
pids+=($!)
wait_for "the API" test -s "$NODE/data/api-addr"
ADDR="http://$(cat "$NODE/data/api-addr")"
TOKEN="$(cat "$NODE/data/api-token")"
state() { curl -fsS "$ADDR/v1/modules/$1" | jq -r .state; }
converged() { [ "$(state "$1" 2>/dev/null)" = converged ]; }
api() {
    curl -fsS -X "$1" -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
        --data-binary @"$3" "$ADDR$2" >&2
    echo >&2
}
for m in rt live web app planed; do wait_for "$m converged" converged "$m"; done

api PUT /v1/intentions/api-mod "$FIX/api/api-mod.put.json"
wait_for "api-mod converged" converged api-mod
api PATCH /v1/intentions/api-mod/settings "$FIX/api/api-mod.patch.json"
sleep 3
wait_for "api-mod converged" converged api-mod

# The live config swapped in place: a live record.
cp "$FIX/intentions/live.toml" "$NODE/intentions/live.toml"
live_recorded() { curl -fsS "$ADDR/v1/events?limit=1000" | jq -e '[.events[] | select(.module == "live" and (.detail | test("reloaded live")))] | length > 0' >/dev/null; }
wait_for "live swapped" live_recorded

# A reload: 1.0.0 -> 1.1.0, done.
STEAD_LOG=warn "$stead" reload app --config "$NODE/stead.toml" --reason "fixture 0.5.0" --wait >&2
wait_for "app converged" converged app

reported() { [ -s "$plane/root/nodes/$NODE_ID/status.json" ]; }
wait_for "a report" reported
sleep 3 # a last pass records what it observed

kill -TERM "${pids[2]}"
wait "${pids[2]}" || die "the agent exited $? on SIGTERM"
cp "$NODE/data/stead.redb" "$REPO/tests/fixtures/store-0.5.0.redb"
cp "$plane/root/nodes/$NODE_ID/desired.json" "$FIX/desired.json"
say "wrote tests/fixtures/store-0.5.0.redb, $FIX/check-0.5.0.txt and $FIX/desired.json"
