# syntax=docker/dockerfile:1
# mrtr-gateway container image.
#
#   docker build -t mrtr-gateway .
#   docker run -p 8080:8080 -v "$PWD/gateway.yaml:/etc/mrtr-gateway/gateway.yaml:ro" \
#     -e MRTR_GATEWAY_STATE_KEYS="$(docker run --rm mrtr-gateway gen-key)" mrtr-gateway
#
# No configuration is baked in: mount one at /etc/mrtr-gateway/gateway.yaml (start from
# config/gateway.example.yaml) and pass the sealing keys through MRTR_GATEWAY_STATE_KEYS.
# The Helm chart in helm/mrtr-gateway does both.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: the project and its dependencies as wheels --------------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gateway ./gateway
RUN pip wheel --wheel-dir /wheels .

# --- runtime: the wheels installed into a clean slim image, run as a non-root user ----------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="mrtr-gateway" \
      org.opencontainers.image.description="Serves legacy MCP servers as MCP 2026-07-28 servers" \
      org.opencontainers.image.licenses="Apache-2.0"
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
    pip install --no-index --find-links /wheels /wheels/mrtr_gateway-*.whl \
    && mkdir -p /etc/mrtr-gateway

USER 10001:10001
EXPOSE 8080
# Slim images have no curl; the probe assumes the default listen.port (8080).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=4)"]
ENTRYPOINT ["mrtr-gateway"]
CMD ["serve", "--config", "/etc/mrtr-gateway/gateway.yaml"]
