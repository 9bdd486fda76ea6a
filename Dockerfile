# sip-edge: SIP registrar and signalling edge.
# Node 26: the Active LTS line (since 2026-10-28). The code also runs on Node 20 and 22; with
# SIP_WORKERS > 1, Node ≥ 22.12 gives each worker its own UDP socket (docs/workers.md).
FROM node:26-bookworm-slim AS build
# gcc + libc headers build the batched UDP engine (src/transport/native/, docs/udp-engine.md) at `npm ci`
# against this Node's own include/node; without them the image runs UDP on node:dgram.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
# The install script (the engine's build) runs at npm ci: its folder first.
COPY src/transport/native ./src/transport/native
RUN rm -rf src/transport/native/build && npm ci --no-audit --no-fund
COPY src ./src
# Never an addon built on the host: `npm run build` builds it here (and the TypeScript).
RUN rm -rf src/transport/native/build && npm run build && mkdir -p src/transport/native/build && npm prune --omit=dev

FROM node:26-bookworm-slim
# openssl makes the development certificate when TLS_CERT_FILE/TLS_KEY_FILE are not given;
# redis-server is the node's store process when SIP_WORKERS > 1 and no Redis is configured;
# flite speaks the Speak verb of placed calls (docs/calls.md; rtpengine plays its files).
RUN apt-get update && apt-get install -y --no-install-recommends openssl ca-certificates redis-server flite && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production SIP_HOST=:: HTTP_HOST=::
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY --from=build /app/src/transport/native/build ./src/transport/native/build
COPY package.json ./
COPY config ./config
USER node
EXPOSE 5060/udp 5060/tcp 5061/tcp 5066/tcp 7443/tcp 8080/tcp
CMD ["node", "dist/main.js"]
