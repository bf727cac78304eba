# One image for every app; docker-compose.yml picks the app with the command.
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
USER node
# Overridden per service: start:api | start:redirector | start:workers
CMD ["npm", "run", "start:api"]
