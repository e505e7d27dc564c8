# syntax=docker/dockerfile:1
# Campaign Engagement Service: a multi-stage build. The build stage compiles better-sqlite3 and the
# TypeScript; the runtime stage holds only dist/ and the production dependencies and runs as the
# unprivileged `node` user. See docs/deployment.md.
#
#   docker build -t ces .
#   docker run -p 3000:3000 -v ces-data:/app/data ces                          # API + worker, SQLite
#   docker run -e DATABASE_URL=... -e REDIS_URL=... -e APP_KEY=... ces node dist/worker.js   # a worker

ARG NODE_VERSION=22

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
# better-sqlite3 compiles from source when no prebuilt binary can be downloaded.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3 make g++ \
  && rm -rf /var/lib/apt/lists/*
# Dependencies first, so that a change to the sources does not rebuild them. Install scripts are run
# only for the packages that need them (the same ones package.json's allowScripts names).
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts \
  && npm rebuild better-sqlite3 esbuild
COPY . .
RUN npm run build \
  && npm prune --omit=dev --no-audit --no-fund

FROM node:${NODE_VERSION}-bookworm-slim
ENV NODE_ENV=production \
  MALLOC_ARENA_MAX=2 \
  PORT=3000 \
  DATABASE_URL=sqlite:/app/data/campaign.db
WORKDIR /app
# Application files belong to root and are read-only for the process; only /app/data is its own.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/bin ./bin
RUN mkdir -p /app/data && chown node:node /app/data
USER node
# The SQLite database (with its -wal and -shm files) and data/app.key, the generated APP_KEY, live here:
# back them up together (docs/deployment.md).
VOLUME ["/app/data"]
EXPOSE 3000
# Liveness: the process answers and reaches its database. Load balancers should use /api/readyz.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/api/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# node itself is PID 1 (no npm, no shell), so SIGTERM reaches the server, which drains within
# SHUTDOWN_TIMEOUT_MS (10 s by default; docker stop waits 10 s unless told --time).
CMD ["node", "--max-old-space-size=192", "dist/server.js"]
