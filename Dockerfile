# ttfx in a container: the static binary in an empty (scratch) image, run as a
# non-root user, with the zero-config SQLite store on the /data volume.
#
# Nothing is pulled: the binary and the CA bundle are built and copied into a
# context first, by
#
#   scripts/image.sh [TAG]          # default ttfx:dev; CONTAINER=docker for docker
#
# which does
#
#   CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags='-s -w' -o CTX/ttfx ./cmd/ttfx
#   cp /etc/ssl/certs/ca-certificates.crt CTX/     # the providers' HTTPS certificates are checked against it
#   mkdir CTX/data
#   podman build -t TAG -f Dockerfile CTX
#
# Run: podman run -p 8080:8080 -v ttfx-data:/data TAG (the zero-config gateway,
# its keys printed once in the log), or with a configuration:
#   ... TAG serve --config /etc/ttfx/ttfx.yaml
# deploy/kubernetes/ttfx.yaml runs it with PostgreSQL.
FROM scratch
COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --chown=65532:65532 data /data
COPY ttfx /usr/local/bin/ttfx
USER 65532:65532
WORKDIR /data
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/ttfx"]
CMD ["serve", "--listen", "0.0.0.0:8080"]
