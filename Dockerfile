# The ccweb-gitea image: the service built from this checkout (only the files the build names; .dockerignore
# is an allowlist), production dependencies only, the pinned gitea-mcp built from source, git and bubblewrap
# for the agent's sandbox, a non-root user. No secret is ever in the build context or the image: they are
# mounted as files at run time (compose.yaml keeps them outside the checkout).
#
#   docker build -t ccweb-gitea .            # or: podman build / buildah bud
#   docker compose up -d                     # compose.yaml: Gitea and the service on one network
#
# Where the Go module proxy does not serve gitea-mcp, put its pinned source archive
# (src/config/gitea-mcp-pin.json: sourceArchive) in deploy/gitea-mcp/ before building; it is checked
# against the pinned sha256. `npm run test:image` builds and runs this file (scripts/test-image/).
ARG NODE_IMAGE=node:24-bookworm-slim
ARG GO_IMAGE=golang:1.24-bookworm

# --- gitea-mcp, at the one revision the service is tested with --------------------------------------------
FROM ${GO_IMAGE} AS gitea-mcp
WORKDIR /build
# The folder deploy/gitea-mcp/ always exists (README.md in it), so this copies the archive when it is there.
COPY src/config/gitea-mcp-pin.json ./
COPY deploy/gitea-mcp/ ./archive/
RUN set -eu; \
    pin() { sed -n "s/.*\"$1\": *\"\([^\"]*\)\".*/\1/p" gitea-mcp-pin.json; }; \
    module=$(pin module); revision=$(pin revision); version=$(pin version); \
    archive="archive/$(pin sourceArchive)"; \
    export CGO_ENABLED=0 GOFLAGS=-buildvcs=false; \
    if [ -f "$archive" ]; then \
      echo "$(pin sourceSha256)  $archive" | sha256sum -c -; \
      mkdir src && tar xzf "$archive" -C src; \
      top=src; [ -f src/gitea-mcp/go.mod ] && top=src/gitea-mcp; \
      (cd "$top" && go build -trimpath -ldflags "-X main.Version=$version" -o /out/gitea-mcp .); \
    else \
      GOBIN=/out go install -trimpath -ldflags "-X main.Version=$version" "$module@$revision"; \
    fi; \
    /out/gitea-mcp --version

# --- the service, compiled ----------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# No package's install script runs: the store's SQLite is Node's own (node:sqlite); better-sqlite3, an
# optional dependency for Node 20 only, is left unbuilt.
RUN npm ci --no-audit --no-fund --ignore-scripts
# Only what the build and the service need, by name: never `COPY . .`, so nothing else of the checkout (its
# secrets, env files, data, local notes) can reach the image even where .dockerignore would let it through.
COPY tsconfig.json tsconfig.build.json ./
COPY bin/ccweb-gitea.js bin/
COPY src/ src/
COPY machines/ machines/
COPY visualizer/ visualizer/
# The build's asset copier, and the installers `demo` imports (the demo builds what it lacks, where it can).
COPY scripts/build-copy-assets.mjs scripts/cache-lock.mjs scripts/cache-lock.d.mts scripts/install-gitea.mjs \
     scripts/install-gitea.d.mts scripts/install-gitea-mcp.mjs scripts/install-gitea-mcp.d.mts scripts/
# Readable by everyone whatever the builder's umask left on the checkout's files (git keeps only the
# executable bit): the service runs as `ccweb`, not as the files' owner.
RUN npm run build && npm prune --omit=dev --no-audit --no-fund && chmod -R a+rX,go-w /app

# --- what runs ---------------------------------------------------------------------------------------------
FROM ${NODE_IMAGE}
# git for workspaces; bubblewrap and ca-certificates for the agent's sandbox and HTTPS to Gitea; tini is not
# needed: node is PID 1 through the exec-form ENTRYPOINT and handles SIGTERM/SIGINT itself.
RUN apt-get update \
 && apt-get install -y --no-install-recommends git bubblewrap ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 ccweb \
 && useradd --system --uid 10001 --gid ccweb --home-dir /var/lib/ccweb-gitea --shell /usr/sbin/nologin ccweb \
 && mkdir -p /var/lib/ccweb-gitea/data /var/lib/ccweb-gitea/codex \
 && chown -R ccweb:ccweb /var/lib/ccweb-gitea && chmod 0700 /var/lib/ccweb-gitea/data /var/lib/ccweb-gitea/codex
COPY --from=gitea-mcp /out/gitea-mcp /usr/local/bin/gitea-mcp
COPY --from=build --chown=root:root /app /opt/ccweb-gitea
WORKDIR /opt/ccweb-gitea
ENV NODE_ENV=production \
    CCWEB_HOST=0.0.0.0 \
    CCWEB_PORT=8080 \
    CCWEB_DATA_DIR=/var/lib/ccweb-gitea/data \
    CODEX_HOME=/var/lib/ccweb-gitea/codex \
    CCWEB_GITEA_MCP_COMMAND=/usr/local/bin/gitea-mcp
# Secrets never in the image or the environment: mount them as files (compose secrets land in /run/secrets/)
# and set CCWEB_GITEA_TOKEN_FILE, CCWEB_WEBHOOK_SECRET_FILE, CCWEB_ADMIN_TOKEN_FILE (and CCWEB_GITEA_MCP_TOKEN_FILE).
VOLUME ["/var/lib/ccweb-gitea/data", "/var/lib/ccweb-gitea/codex"]
USER ccweb
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.CCWEB_PORT||8080)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: node is PID 1 and gets SIGTERM itself (drains within 20 s; compose's stop_grace_period is 30 s).
ENTRYPOINT ["node", "/opt/ccweb-gitea/bin/ccweb-gitea.js"]
CMD ["serve"]
