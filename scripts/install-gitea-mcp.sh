#!/usr/bin/env bash
# Installs the official gitea-mcp binary (Go module gitea.com/gitea/gitea-mcp) into .tools/bin/.
#
#   bash scripts/install-gitea-mcp.sh            # pinned version
#   GITEA_MCP_VERSION=v1.2.3 bash scripts/install-gitea-mcp.sh
#
# Idempotent: does nothing when .tools/bin/gitea-mcp already reports the pinned version.
# Exits 0 with a message when Go is missing or the module cannot be fetched (tests then use the
# stand-in in test/support/gitea-mcp-standin/); pass --strict to exit non-zero in those cases.
set -euo pipefail

VERSION="${GITEA_MCP_VERSION:-v1.1.0}"
MODULE="gitea.com/gitea/gitea-mcp"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="$ROOT/.tools/bin"
BIN="$BIN_DIR/gitea-mcp"
STAMP="$BIN_DIR/.gitea-mcp.version"
STRICT=0
[[ "${1:-}" == "--strict" ]] && STRICT=1

soft_fail() {
  echo "install-gitea-mcp: $1" >&2
  echo "install-gitea-mcp: tests will use the stand-in (test/support/gitea-mcp-standin/server.mjs)" >&2
  exit $(( STRICT ? 1 : 0 ))
}

if [[ -x "$BIN" && -f "$STAMP" && "$(cat "$STAMP")" == "$VERSION" ]]; then
  echo "install-gitea-mcp: $BIN already at $VERSION"
  exit 0
fi

command -v go >/dev/null 2>&1 || soft_fail "Go is not installed; cannot install $MODULE@$VERSION"

TMP_BIN="$(mktemp -d)"
trap 'rm -rf "$TMP_BIN"' EXIT
if ! GOBIN="$TMP_BIN" GOFLAGS="${GOFLAGS:-} -mod=mod" timeout 600 go install "$MODULE@$VERSION"; then
  soft_fail "go install $MODULE@$VERSION failed (the Go module proxy may not serve it)"
fi
mkdir -p "$BIN_DIR"
mv -f "$TMP_BIN/gitea-mcp" "$BIN"
echo "$VERSION" > "$STAMP"
echo "install-gitea-mcp: installed $MODULE@$VERSION at $BIN"
