# mesh-verify's container image (README.md, "Container image"): a static
# binary on distroless/static, run as the non-root user 65532, no shell.
# Without a Docker daemon, `make image` writes the same image as an OCI
# layout (tools/image).
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t mesh-verify .
#   docker run --rm mesh-verify version

FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# The Makefile's flags (make build): -trimpath, stripped (-s -w) and the
# version stamp; CGO_ENABLED=0 for a binary the final stage can run
# without a libc. GOWORK=off: the product's own go.mod, not the
# repository's workspace (go.work) with the lab and the e2e tests.
RUN CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mesh-verify ./cmd/mesh-verify

# distroless/static: CA certificates, /etc/passwd with nonroot (65532),
# tzdata; no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="mesh-verify" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/mesh-verify/mesh-verify"
COPY --from=build /out/mesh-verify /mesh-verify
USER 65532:65532
WORKDIR /home/nonroot
ENTRYPOINT ["/mesh-verify"]
