# syntax=docker/dockerfile:1
#
# importd and importctl as static binaries on a distroless base: no shell, no
# package manager, a non-root user.
#
#   docker build -t bulkimport/importd:local .
#   docker run --rm bulkimport/importd:local --help
#   docker run --rm --entrypoint /importctl bulkimport/importd:local --help

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Static binaries: the final image has no C library.
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY . .
# The cache mounts keep downloaded modules and build results across builds,
# so a source change recompiles only what it touched.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags='-s -w' -o /out/ ./cmd/importd ./cmd/importctl
# The mount point for file:// documents (docker-compose.yml). Created here
# because the final image has no mkdir; owned by the non-root user so that a
# new named volume mounted on it is writable.
RUN mkdir -p /out/documents

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/importd /importd
COPY --from=build /out/importctl /importctl
COPY --from=build --chown=65532:65532 /out/documents /documents
# nonroot in distroless; numeric so that Kubernetes' runAsNonRoot can verify it.
USER 65532:65532
# The binary defaults to 127.0.0.1:8080, which is unreachable from outside a
# container.
ENV HTTP_ADDR=0.0.0.0:8080
EXPOSE 8080
ENTRYPOINT ["/importd"]
CMD ["serve"]
