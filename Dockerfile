# Builds the fixpoint binaries (worker, enqueue, report, simllm) into one
# image that every fixpoint service of docker-compose.yml runs.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/ ./cmd/...

# The runtime image has no shell and no HTTP client; the healthchecks in
# docker-compose.yml run busybox's wget and nc. The musl build is static.
FROM busybox:1.37.0-musl AS busybox

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=busybox /bin/busybox /usr/local/bin/busybox
COPY --from=build /out/ /usr/local/bin/
USER nonroot
# In a container the worker's /metrics, /healthz and /readyz must listen on
# every interface to be reached (the default is 127.0.0.1:9464).
ENV FIXPOINT_METRICS_ADDR=0.0.0.0:9464
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/worker"]
