#!/usr/bin/env bash
# `npm run test:image [-- vitest args, e.g. -t secret]`: builds the image from the repository's Dockerfile and runs it end to end
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
# Canaries: untracked files a checkout may hold — the compose flow's old secrets/, env files, a secret-shaped
# file inside a folder the build copies, a local note — each with a unique content, planted before the build
# and removed after it. test/image/image.e2e.ts fails when any untracked file of the build context reaches the
# image (by path), or a canary's content is anywhere in the image's filesystem.
evidence=$(mktemp -d /tmp/ccweb-image-evidence-XXXXXX)
export CCWEB_IMAGE_EVIDENCE=$evidence
planted=()
remove_canaries() { for f in "${planted[@]}"; do rm -f "$f"; done; rmdir secrets 2>/dev/null || true; }
trap remove_canaries EXIT
mkdir -p secrets
for f in secrets/gitea_token secrets/webhook_secret secrets/admin_token .env src/.env.local notes-local.txt; do
  if [ -e "$f" ]; then echo "test:image: $f exists in the checkout; move it away first (the test plants a canary there)" >&2; exit 1; fi
  value="ccweb-canary-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
  printf '%s\n' "$value" > "$f"
  planted+=("$f")
  printf '%s\t%s\n' "$f" "$value" >> "$evidence/canaries.tsv"
done

SECONDS=0
# --isolation chroot: RUN steps need no OCI runtime (crun and runc's defaults fail on these machines, see
# test/image/image.e2e.ts); --network host: the build reaches the npm registry and the Go module proxy.
buildah bud --isolation chroot --network host --pull-never --layers -t "$CCWEB_TEST_IMAGE" -f Dockerfile . >&2
phase "buildah bud of Dockerfile" "$SECONDS"

# The build context as buildah sent it (after .dockerignore): copied whole into an empty image and listed.
# Its files that git does not track (untracked or ignored) must not reach the image.
SECONDS=0
printf 'FROM scratch\nCOPY . /context/\n' > "$evidence/Context.Dockerfile"
buildah bud --isolation chroot --pull-never -q -t localhost/ccweb-gitea-context:test -f "$evidence/Context.Dockerfile" . >/dev/null
ctr=$(buildah from localhost/ccweb-gitea-context:test)
mnt=$(buildah mount "$ctr")
(cd "$mnt/context" && find . \( -type f -o -type l \) -printf '%P\n' | LC_ALL=C sort) > "$evidence/context-files.txt"
buildah umount "$ctr" >/dev/null && buildah rm "$ctr" >/dev/null && buildah rmi localhost/ccweb-gitea-context:test >/dev/null
git ls-files --others | LC_ALL=C sort > "$evidence/untracked.txt"
LC_ALL=C comm -12 "$evidence/context-files.txt" "$evidence/untracked.txt" > "$evidence/context-untracked.txt"
remove_canaries
echo "test:image: build context: $(wc -l < "$evidence/context-files.txt") files, of which untracked: $(tr '\n' ' ' < "$evidence/context-untracked.txt")" >&2
phase "build context listed" "$SECONDS"

SECONDS=0
status=0
npx vitest run --config vitest.image.config.ts "$@" || status=$?
phase "podman run, end to end" "$SECONDS"
phase "total" "$(($(date +%s) - started))"
rm -rf "$evidence"
exit $status
