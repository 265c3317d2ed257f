#!/usr/bin/env bash
# `npm run test:install`: docs/operations.md's install-step blocks, as written, in a fresh Debian 12
# root filesystem, ending with doctor green against a throwaway real Gitea (test/image/install-steps.e2e.ts).
# Needs root, debootstrap, podman (for the cached bases) and bubblewrap (installed with apt-get when missing).
# The repository is cloned from this checkout's HEAD: commit first.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "test:install: run as root (debootstrap and the steps need it)" >&2; exit 1; }
need=()
for tool in debootstrap podman bwrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  echo "test:install: installing debootstrap podman bubblewrap from Debian's packages" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap podman bubblewrap >/dev/null
fi
started=$(date +%s)
bash scripts/test-image/bases.sh
status=0
CCWEB_IMAGE_TEST_FILE=test/image/install-steps.e2e.ts npx vitest run --config vitest.image.config.ts || status=$?
printf 'test:install: total: %s s\n' "$(($(date +%s) - started))" >&2
exit $status
