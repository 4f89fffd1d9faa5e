#!/usr/bin/env bash
# How tests/fixtures/store-0.4.0.redb and tests/fixtures/store-0.4.0/check-0.4.0.txt
# were made (documentation; no test runs this script).
#
# Builds release 0.4.0 (commit d38b922) in a temporary git worktree and, on a
# node under /tmp/fixture-040 against the local Docker Engine:
#   - prints `stead check` for the intentions in tests/fixtures/store-0.4.0/
#     intentions (every runtime field, a live-reloaded config, a plain
#     module): check-0.4.0.txt, the digests 0.4.0 gives them;
#   - runs the agent once with live.toml's default `v` set to "one", then
#     once with the file as committed ("two": a live reload, so the store
#     holds a `live` record), then once more (a quiet pass);
#   - copies the agent's store file to tests/fixtures/store-0.4.0.redb and
#     removes the containers, the volume and the node.
# tests/upgrade.rs opens a copy with the new code (schema 6 -> 7) and
# compares every intention with the new code's parse of the same files, and
# compares the new code's `stead check` with check-0.4.0.txt.
#
# Needs: a Docker Engine with the test images (scripts/engine.sh,
# scripts/test-images.sh), cargo.
# Env:
#   CARGO_TARGET_DIR     reuse a target dir (default: a fresh one, a full build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAME=store-fixture-0.4.0.sh
# shellcheck source=scripts/lib.sh
. scripts/lib.sh

COMMIT=d38b922
REPO="$PWD"
OUT="$REPO/tests/fixtures"
NODE=/tmp/fixture-040
NODE_ID=fixture-040
[ ! -e "$NODE" ] || die "$NODE exists; remove it first"

work="$(mktemp -d /tmp/stead-fixture.XXXXXX)"
src="$work/src"
cleanup() {
    docker ps -aq --filter "label=stead.managed-by=$NODE_ID" | xargs -r docker rm -f >/dev/null 2>&1 || true
    docker volume rm fixture-040-data >/dev/null 2>&1 || true
    git -C "$REPO" worktree remove --force "$src" >/dev/null 2>&1 || true
    rm -rf "$work" "$NODE"
}
trap cleanup EXIT

git -C "$REPO" worktree add --detach "$src" "$COMMIT" >/dev/null
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$work/target}"
(cd "$src" && cargo build --release --locked)
stead="$CARGO_TARGET_DIR/release/stead"
"$stead" --version | grep -q '^stead 0.4.0' || die "not 0.4.0: $("$stead" --version)"

mkdir -p "$NODE/intentions"
cat >"$NODE/stead.toml" <<EOF
node_id = "$NODE_ID"
data_dir = "$NODE/data"
intentions_dir = "$NODE/intentions"
api_listen = "127.0.0.1:0"
EOF
cp "$OUT"/store-0.4.0/intentions/*.toml "$NODE/intentions/"
"$stead" check --config "$NODE/stead.toml" >"$OUT/store-0.4.0/check-0.4.0.txt"

sed -i 's/v = "two"/v = "one"/' "$NODE/intentions/live.toml"
"$stead" run --once --config "$NODE/stead.toml"
cp "$OUT/store-0.4.0/intentions/live.toml" "$NODE/intentions/live.toml"
sleep 2
"$stead" run --once --config "$NODE/stead.toml"
"$stead" run --once --config "$NODE/stead.toml"
cp "$NODE/data/stead.redb" "$OUT/store-0.4.0.redb"
say "wrote $OUT/store-0.4.0.redb and $OUT/store-0.4.0/check-0.4.0.txt"
