# lockstep's commands in one small image: shop (the default command),
# loadgen, workshop and orderworker. Static binaries on Alpine (whose busybox wget serves
# the compose healthchecks), run as an unprivileged user. No syntax line:
# the engine's own Dockerfile frontend builds it, cache mounts included,
# with no registry to fetch a frontend from.

FROM golang:1.26-alpine AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
COPY go.mod go.sum ./
# Modules in the golang image's GOPATH (/go), compiled packages in root's
# cache: both kept by the builder between builds.
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/shop ./cmd/loadgen ./cmd/workshop ./cmd/orderworker

FROM alpine:3.22
# A home directory to write in: the workshop and loadgen write their
# reports under out/ of the working directory.
RUN adduser -D -u 10001 lockstep
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
WORKDIR /home/lockstep
EXPOSE 8080
CMD ["shop"]
