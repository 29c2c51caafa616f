# mrtr-gateway container image.
#
#   docker build -t mrtr-gateway .
#   docker run -p 8080:8080 --stop-timeout 30 -v "$PWD/gateway.yaml:/etc/mrtr-gateway/gateway.yaml:ro" \
#     -e MRTR_GATEWAY_STATE_KEYS="$(docker run --rm mrtr-gateway gen-key)" mrtr-gateway
#
# --stop-timeout must exceed listen.drain_timeout (20 s by default) plus a few seconds of shutdown:
# Docker's own default (10 s) SIGKILLs calls still waiting for their client's input mid-drain.
#
# No configuration is baked in: mount one at /etc/mrtr-gateway/gateway.yaml (start from
# config/gateway.example.yaml) and give the sealing keys through state.keys_file (a mounted
# Secret, reloaded without a restart) or MRTR_GATEWAY_STATE_KEYS. The Helm chart in
# helm/mrtr-gateway does both.
#
# Reproducible: the base image is pinned by digest (the multi-architecture index of
# python:3.11.14-slim-bookworm; to move it, `docker buildx imagetools inspect <tag>` and update
# both tag and digest), and every Python package, the build backend included, is installed at the
# version in constraints.txt (scripts/lock-runtime.sh regenerates it).
#
# No `# syntax=` line: it would make BuildKit pull the docker/dockerfile frontend from Docker Hub
# even when the base image comes from a mirror. Everything used here (RUN --mount included) is in
# BuildKit's built-in frontend and in buildah/podman.
#
# OCI labels: pass the release and commit, e.g.
#   docker build --build-arg VERSION=0.1.0 --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg SOURCE=<where your copy of the repository lives> .

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

# --- build: the project and its dependencies as wheels --------------------------------------------
FROM ${PYTHON_IMAGE} AS build
# PIP_CONSTRAINT also reaches the isolated build environment, so setuptools is pinned too.
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_CONSTRAINT=/src/constraints.txt \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY constraints.txt pyproject.toml README.md ./
COPY gateway ./gateway
# The tracing extra (OpenTelemetry SDK + OTLP/HTTP exporter) is installed, off until OTEL_TRACES_EXPORTER is set;
# the uvloop extra too, the loop the gateway then serves on (listen.event_loop: auto).
RUN pip wheel --wheel-dir /wheels '.[tracing,uvloop]' dumb-init

# --- runtime: the wheels installed into a clean slim image, run as a non-root user ----------------
FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=""
LABEL org.opencontainers.image.title="mrtr-gateway" \
      org.opencontainers.image.description="Serves legacy MCP servers as MCP 2026-07-28 servers" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.source="${SOURCE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 gateway \
    && useradd --system --uid 10001 --gid gateway --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin gateway
# Bind-mounted from the build stage so the wheels never land in a layer; pip compiles the
# bytecode at install time, so a read-only root filesystem costs nothing at start-up.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    --mount=type=bind,from=build,source=/src/constraints.txt,target=/tmp/constraints.txt \
    pip install --no-index --find-links /wheels --constraint /tmp/constraints.txt \
       'mrtr-gateway[tracing,uvloop]' dumb-init \
    && mkdir -p /etc/mrtr-gateway

USER 10001:10001
EXPOSE 8080
# Slim images have no curl: the gateway probes itself, on the listen.port of the mounted config.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["mrtr-gateway", "healthcheck", "--config", "/etc/mrtr-gateway/gateway.yaml"]
# dumb-init is PID 1: it reaps orphans (a stdio backend's own children would otherwise stay
# zombies) and forwards SIGTERM/SIGHUP to the gateway alone (--single-child), so the gateway, not
# its backends, decides the shutdown order.
ENTRYPOINT ["dumb-init", "--single-child", "--", "mrtr-gateway"]
CMD ["serve", "--config", "/etc/mrtr-gateway/gateway.yaml"]
