# syntax=docker/dockerfile:1
# The backupcycle worker image (with the starter beside it), used by docker-compose.yml:
#   docker build -t backupcycle .
#   docker run --env-file deploy/.env -v $PWD/deploy/config.compose.yaml:/etc/backupcycle/config.yaml:ro backupcycle
# Pure Go (CGO_ENABLED=0), so the runtime needs no libc. The worker is the production one: the embedded Temporal
# server, Web UI and emulated site of `make demo` are the development worker's (internal/devenv/cmd/devworker).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/starter ./starter

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/worker /out/starter /usr/local/bin/
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/worker"]
CMD ["--config", "/etc/backupcycle/config.yaml"]
