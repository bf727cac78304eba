# One image for every app; docker-compose.yml picks the app with the command.
FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json .npmrc ./
RUN npm install --no-audit --no-fund --loglevel=warn
COPY tsconfig.json ./
COPY domain ./domain
COPY infra ./infra
COPY apps ./apps
COPY scripts ./scripts
USER node
# Overridden per service: start:api | start:redirector | start:workers
CMD ["npm", "run", "start:api"]
