#!/usr/bin/env bash
# `npm run test:image` (issue 32): builds the image from the repository's Dockerfile and runs it end to end
# (test/image/image.e2e.ts). No image registry is needed: scripts/test-image/bases.sh makes the two bases
# the Dockerfile's FROM lines name. Needs root, debootstrap, buildah, podman and runc (it installs them with
# apt-get when missing), Go in /usr/local/go (or CCWEB_IMAGE_GO_ROOT) and, where the Go module proxy does not
# serve gitea-mcp, CCWEB_GITEA_MCP_SOURCE (its pinned source archive). Prints each phase's wall time.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "test:image: run as root (buildah, podman and debootstrap need it)" >&2; exit 1; }
need=()
for tool in debootstrap buildah podman runc bwrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "test:image: installing ${need[*]} from Debian's packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap buildah podman runc uidmap bubblewrap >/dev/null
fi
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
export CCWEB_TEST_IMAGE=${CCWEB_TEST_IMAGE:-localhost/ccweb-gitea:test}
phase() { printf 'test:image: %s: %s s\n' "$1" "$2" >&2; }
started=$(date +%s)

SECONDS=0
bash scripts/test-image/bases.sh
phase "base images" "$SECONDS"

# The pinned source archive goes into the build context's deploy/gitea-mcp/ (ignored by git); the Dockerfile
# checks its sha256 and otherwise runs `go install` of the pinned revision.
archive=$(node -p 'require("./src/config/gitea-mcp-pin.json").sourceArchive')
if [ -n "${CCWEB_GITEA_MCP_SOURCE:-}" ] && [ ! -f "deploy/gitea-mcp/$archive" ]; then cp "$CCWEB_GITEA_MCP_SOURCE" "deploy/gitea-mcp/$archive"; fi
SECONDS=0
# --isolation chroot: RUN steps need no OCI runtime (crun and runc's defaults fail on these machines, see
# test/image/image.e2e.ts); --network host: the build reaches the npm registry and the Go module proxy.
buildah bud --isolation chroot --network host --pull-never --layers -t "$CCWEB_TEST_IMAGE" -f Dockerfile . >&2
phase "buildah bud of Dockerfile" "$SECONDS"

SECONDS=0
status=0
npx vitest run --config vitest.image.config.ts || status=$?
phase "podman run, end to end" "$SECONDS"
phase "total" "$(($(date +%s) - started))"
exit $status
