# One image for every app; docker-compose.yml picks the app with the command.

# The redirector's peer-address cache (infra/http/peer-address.c, preloaded by
# scripts/redirector.sh, and its Node-API view, peer-address-view.c) and the click spool's
# mapped files (infra/fs/mapped-file.c), compiled where there is a C compiler: the slim image
# has none.
FROM node:20-bookworm AS native
WORKDIR /app
COPY infra/http/peer-address.c infra/http/peer-address-view.c infra/http/
COPY infra/fs/mapped-file.c infra/fs/
COPY scripts/peer-address.sh scripts/mapped-file.sh scripts/
RUN sh scripts/peer-address.sh && sh scripts/mapped-file.sh

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm install --no-audit --no-fund --loglevel=warn
COPY tsconfig.json ./
COPY domain ./domain
COPY infra ./infra
COPY apps ./apps
COPY scripts ./scripts
# The bundles the redirector and the CLI start from (scripts/bundle.mjs): /app is not the node user's to write.
RUN node scripts/bundle.mjs redirector apps/redirector/main.ts && node scripts/bundle.mjs cli apps/cli/main.ts
COPY --from=native /app/.build/peer-address.so /app/.build/peer-address-view.node /app/.build/mapped-file.node .build/
USER node
# Overridden per service: start:api | start:redirector | start:workers
CMD ["npm", "run", "start:api"]
