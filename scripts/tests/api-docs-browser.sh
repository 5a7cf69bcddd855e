#!/usr/bin/env bash
# The admin listener's interactive API page in a real browser (C11): the
# release binary starts with an admin listener on loopback, headless
# Chromium (Debian's `chromium`, which scripts/install-test-deps.sh
# installs) loads `/docs`, must show every operation of `/openapi.json`,
# and runs `GET /` from the page against the public port. Playwright's
# library (playwright-core, pinned, from npm into target/node-tools) drives
# the browser; no browser is downloaded. A screenshot of the page is kept
# as the run's artifact in target/artifacts/api-docs.png. Never skips: a
# missing tool fails it.
#
# The service binary is $ITEMS_SERVICE_BIN (default target/release/items-service).
set -euo pipefail

binary=$(realpath -m -- "${ITEMS_SERVICE_BIN:-$(dirname "$0")/../../target/release/items-service}")
cd "$(dirname "$0")/../.."
source scripts/lib/service.sh

# The last release that runs on Node.js 18, Debian 12's `nodejs` (which
# scripts/install-test-deps.sh installs): 1.62 and later refuse to start
# on it ("Playwright requires Node.js 20 or higher").
PLAYWRIGHT_CORE=1.61.1
tools=target/node-tools
artifacts=target/artifacts
name=$(basename "$0")

command -v node > /dev/null || { echo "$name: node is missing (scripts/install-test-deps.sh installs nodejs)" >&2; exit 1; }
command -v npm > /dev/null || { echo "$name: npm is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  { echo "$name: Node.js $(node --version) is too old: playwright-core $PLAYWRIGHT_CORE needs 18 or later" >&2; exit 1; }
test -x /usr/bin/chromium || { echo "$name: /usr/bin/chromium is missing (scripts/install-test-deps.sh installs it)" >&2; exit 1; }
if [[ "$(node -p 'require("./'"$tools"'/node_modules/playwright-core/package.json").version' 2>/dev/null)" != "$PLAYWRIGHT_CORE" ]]; then
  echo "$name: installing playwright-core $PLAYWRIGHT_CORE from the npm registry into $tools (once)…" >&2
  npm install --silent --no-audit --no-fund --prefix "$tools" "playwright-core@$PLAYWRIGHT_CORE"
fi
mkdir -p "$artifacts"

start_service "$binary" 30 ADMIN_PORT=0 ADMIN_HOST=127.0.0.1 RATE_LIMIT_MAX=0
admin_port=$(sed -n 's/.*items_service: listening .*admin_address=[^ ]*:\([0-9][0-9]*\).*/\1/p' "$work/service.log" | head -n 1)
[[ -n $admin_port ]] || fail_with_log "$work/service.log" "the start-up line names no admin_address"

cp scripts/tests/api-docs-browser.mjs "$tools/"
if ! seen=$(node "$tools/api-docs-browser.mjs" "http://127.0.0.1:$admin_port" "$artifacts/api-docs.png"); then
  fail_with_log "$work/service.log" "the page failed in Chromium: $seen"
fi
echo "$name: $seen"
echo "$name: every operation shown, GET / run from the page against port $port; screenshot in $artifacts/api-docs.png"
