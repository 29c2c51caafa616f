#!/usr/bin/env bash
# Build the container image with podman and check that it runs the way the README and the Helm
# chart promise: healthy, non-root, on a read-only root filesystem, and stopping with a clean
# drain on SIGTERM.
#
#   sudo bash scripts/check-image.sh                # the pinned base if pullable, else a stand-in
#   PYTHON_IMAGE=registry.example.com/mirror/python:3.11.14-slim-bookworm@sha256:65a9... \
#     sudo -E bash scripts/check-image.sh           # a mirrored copy of the pinned base
#
# What it does:
#   1. installs podman (runc, buildah, debootstrap, curl, jq) from Debian when missing;
#   2. picks the base image: PYTHON_IMAGE (else the Dockerfile's pinned default) when it is
#      present or pullable, otherwise a STAND-IN built with `debootstrap --variant=minbase
#      bookworm` (Debian's python3.11, with pip and python on PATH as in the official image),
#      cached in ${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-gateway/ and in podman's storage, so only
#      the first run pays for it;
#   3. builds the Dockerfile (`--format docker`, so the HEALTHCHECK is kept) with the VERSION and
#      REVISION build arguments;
#   4. runs it as the chart does (--read-only with a tmpfs /tmp only, --cap-drop ALL,
#      no-new-privileges), on the host's network with free 127.0.0.1 ports (a bridge would turn on
#      IP forwarding and leave NAT chains on the host), with a generated key and the bundled legacy
#      demo server in a second container, and checks: /healthz and
#      /readyz, a tools/call through the gateway, uid 10001, a write to / fails, the image's
#      HEALTHCHECK, the OCI labels, and a drain: a call held for the user's answer, `podman stop`
#      (SIGTERM), /readyz turns 503, the held call's retry completes, exit code 0 well within
#      the stop timeout, drain log lines and no traceback;
#   5. checks that IP forwarding, container links and firewall chains are as it found them, and
#      prints a summary; the exit status is non-zero when any check failed.
#
# Needs root (apt-get, debootstrap, rootful podman). Environment:
#   PYTHON_IMAGE      base image to build on: a copy of the pinned python:3.11.14-slim-bookworm
#                     (default: the Dockerfile's pinned reference on Docker Hub; when that is
#                     neither present nor pullable, the stand-in)
#   DEBIAN_MIRROR     mirror for debootstrap (default: debootstrap's own, Debian's)
#   IMAGE             tag of the built image (default localhost/mrtr-gateway:check)
#   KEEP=1            leave the containers and the work directory for a look afterwards
#
# Workarounds for restricted machines (all needed on a sandboxed VM: cgroup v1, no systemd, root
# without CAP_SYS_RESOURCE, TLS interception, no Docker Hub):
#   * `--runtime runc`: runc is installed and always used (crun can refuse some cgroup setups).
#     podman itself picks the cgroupfs cgroup manager and the file events backend when systemd
#     is not running, so neither needs a flag.
#   * No CAP_SYS_RESOURCE (root inside a sandbox): podman's default ulimits for root
#     (nofile 1048576, nproc 4194304) cannot be applied and runc fails with "error setting
#     rlimit type 7 (then 6): operation not permitted". The script then passes explicit --ulimit
#     values no higher than this shell's hard limits and podman's own nproc (`--ulimit host` and
#     `-1` do not help in podman 4.3).
#   * A TLS-intercepting proxy (this machine's own CA in /etc/ssl/certs): pip inside the build
#     must trust it. The host's CA bundle is bind-mounted read-only over the base image's own
#     bundles (the system one and pip's vendored certifi one) for the RUN steps only; both
#     files exist in the base, so nothing is left in the image. An index set in PIP_INDEX_URL /
#     PIP_EXTRA_INDEX_URL (or index-url in the host's pip.conf) is passed the same way, as a
#     generated /etc/pip.conf (that one leaves an empty /etc/pip.conf in the build layers).
#     No host name is written anywhere.
#   * No systemd: podman cannot schedule the HEALTHCHECK timer and logs an error on every run;
#     DISABLE_HC_SYSTEMD=true turns the timer off (the check runs the HEALTHCHECK itself).
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE="${IMAGE:-localhost/mrtr-gateway:check}"
CACHE_DIR="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mrtr-gateway"
STANDIN_TAR="$CACHE_DIR/bookworm-python3.11-standin.tar"
# Bump the suffix when the stand-in recipe below changes, so caches are rebuilt.
STANDIN_IMAGE="localhost/mrtr-gateway-standin:bookworm-python3.11-1"
DRAIN_TIMEOUT=20      # listen.drain_timeout in the test config (the default)
STOP_TIMEOUT=30       # podman stop -t: above drain_timeout, as the Dockerfile's run example says
GW_NAME="mrtr-check-gw-$$"
BE_NAME="mrtr-check-backend-$$"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
GW_PORT="$(free_port)"       # the gateway, on the host's loopback (host network: no bridge, no NAT)
BACKEND_PORT="$(free_port)"  # the demo server, on the host's loopback too

started_all=$(date +%s)
step() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
die() { printf 'check-image: %s\n' "$*" >&2; exit 1; }
elapsed() { echo "$(($(date +%s) - $1))s"; }

# --- results: every check is recorded, the summary lists them, any failure fails the script --------
results=()
failed=0
pass() { results+=("PASS  $1"); printf '   PASS  %s\n' "$1"; }
fail() { results+=("FAIL  $1"); printf '   FAIL  %s\n' "$1"; failed=$((failed + 1)); }
check() { # NAME COMMAND...: PASS when the command succeeds
  local name="$1"; shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# The host as the check found it: what a container on podman's default bridge changes (IP forwarding,
# the CNI/netavark chains and bridge). The containers run on the host's network, so nothing should.
host_state() {
  printf 'ip_forward=%s\n' "$(cat /proc/sys/net/ipv4/ip_forward 2>/dev/null)"
  ip -o link show 2>/dev/null | awk -F': ' '{print "link=" $2}' | sed 's/@.*//' | grep -E 'cni|podman|netavark|veth' || true
  if command -v iptables-save >/dev/null; then
    iptables-save 2>/dev/null | grep -E '^:(CNI|NETAVARK|PODMAN)' | awk '{print "chain=" $1}' || true
  fi
}
host_before="$(host_state)"

work="$(mktemp -d)"
cleanup() {
  if [[ "${KEEP:-}" == 1 ]]; then
    echo "KEEP=1: containers $GW_NAME $BE_NAME and $work left in place"
    return
  fi
  # The demo server first: it lives in the gateway's network namespace.
  podman rm --force --time 0 "$BE_NAME" >/dev/null 2>&1 || true
  podman rm --force --time 0 "$GW_NAME" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

# --- 1. tools ---------------------------------------------------------------------------------
step "tools"
need_pkgs=()
command -v podman >/dev/null || need_pkgs+=(podman)
command -v buildah >/dev/null || need_pkgs+=(buildah)
command -v runc >/dev/null || need_pkgs+=(runc)
command -v curl >/dev/null || need_pkgs+=(curl)
command -v jq >/dev/null || need_pkgs+=(jq)
command -v git >/dev/null || need_pkgs+=(git)
if ((${#need_pkgs[@]})); then
  [[ $EUID -eq 0 ]] || die "missing ${need_pkgs[*]}: run as root, or install them"
  # Debian's podman 4.3 with netavark; uidmap, fuse-overlayfs and slirp4netns are only for
  # rootless use, kept so that the same machine can also try it without root.
  note "apt-get install ${need_pkgs[*]}"
  t=$(date +%s)
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${need_pkgs[@]}" uidmap fuse-overlayfs slirp4netns >"$work/apt.log" 2>&1 \
    || { tail -20 "$work/apt.log" >&2; die "apt-get install failed"; }
  note "installed in $(elapsed "$t")"
fi
[[ $EUID -eq 0 ]] || die "needs root (rootful podman; the stand-in needs debootstrap)"

# Every podman call goes through these options (see the header for why).
PODMAN=(podman --runtime runc)
ULIMITS=()
cap_eff=$((16#$(awk '/^CapEff:/ {print $2}' /proc/self/status)))
if (((cap_eff >> 24 & 1) == 0)); then # CAP_SYS_RESOURCE is bit 24
  # nofile: podman keeps this shell's hard limit for itself; nproc: podman lowers its own (to
  # 32768 here), and 4096 processes of uid 10001 is plenty for one gateway and its demo server.
  nofile=$(ulimit -Hn)
  nproc=$(ulimit -Hu)
  [[ "$nproc" == unlimited || "$nproc" -gt 4096 ]] && nproc=4096
  [[ "$nofile" == unlimited || "$nofile" -gt 65536 ]] && nofile=65536
  ULIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc")
  note "no CAP_SYS_RESOURCE here: containers get ${ULIMITS[*]}"
fi
# podman schedules a container's HEALTHCHECK with a systemd timer; without systemd it logs
# "unable to get systemd connection to add healthchecks" on every run. The check runs the
# HEALTHCHECK itself (`podman healthcheck run`), so the timer is switched off there (podman's own
# switch: `--health-interval disable` does not silence it in 4.3).
[[ -d /run/systemd/system ]] || export DISABLE_HC_SYSTEMD=true
note "$("${PODMAN[@]}" --version), runtime $(runc --version | head -1), $(podman info --format '{{.Host.CgroupsVersion}} cgroups, {{.Host.CgroupManager}} manager, {{.Store.GraphDriverName}} storage')"

# --- 2. base image ----------------------------------------------------------------------------
step "base image"
# The pinned base: PYTHON_IMAGE (a mirror's copy), else the Dockerfile's own default from Docker
# Hub (qualified: podman does not guess a registry for a short name).
base=""
wanted="${PYTHON_IMAGE:-$(sed -n 's/^ARG PYTHON_IMAGE=//p' Dockerfile)}"
first="${wanted%%/*}"
if [[ "$wanted" != */* || ( "$first" != *[.:]* && "$first" != localhost ) ]]; then
  wanted="docker.io/library/$wanted"
fi
if "${PODMAN[@]}" image exists "$wanted"; then
  base="$wanted"
elif "${PODMAN[@]}" pull --quiet "$wanted" >"$work/pull.log" 2>&1; then
  base="$wanted"
else
  note "$wanted: not present here, and \`podman pull\` failed"
fi
[[ -n "$base" ]] && note "base: $base"
if [[ -z "$base" ]]; then
  base="$STANDIN_IMAGE"
  echo "   *** STAND-IN BASE: Debian bookworm (debootstrap) with Debian's python3.11, NOT the pinned"
  echo "   *** python:3.11.14-slim-bookworm. Same Debian release and Python minor version; Python"
  echo "   *** lives in /usr (not /usr/local) and pip is Debian's. Set PYTHON_IMAGE to check the real base."
  if "${PODMAN[@]}" image exists "$STANDIN_IMAGE"; then
    note "cached: $STANDIN_IMAGE"
  else
    if [[ ! -s "$STANDIN_TAR" ]]; then
      command -v debootstrap >/dev/null || {
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >"$work/apt-debootstrap.log" 2>&1
      }
      note "debootstrap --variant=minbase bookworm (a few minutes, once)"
      t=$(date +%s)
      mkdir -p "$CACHE_DIR"
      rootfs="$work/rootfs"
      # python-is-python3 makes `python` resolve, python3-pip gives `pip` (for python3.11), as
      # in the official image; passwd (groupadd/useradd) is already in minbase.
      debootstrap --variant=minbase \
        --include=python3.11,python3-venv,python3-pip,python-is-python3,ca-certificates \
        bookworm "$rootfs" ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >"$work/debootstrap.log" 2>&1 \
        || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
      # The official image's pip installs into its own Python without complaint; Debian marks
      # its Python as externally managed (PEP 668), which would make the Dockerfile's
      # `pip install` fail. A stand-in is a throwaway image: drop the marker.
      rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
      rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
      tar --numeric-owner -C "$rootfs" -cf "$STANDIN_TAR.tmp" .
      mv "$STANDIN_TAR.tmp" "$STANDIN_TAR" # only a complete tarball counts as a cache
      rm -rf "$rootfs"
      note "stand-in root filesystem in $(elapsed "$t"): $STANDIN_TAR"
    fi
    t=$(date +%s)
    "${PODMAN[@]}" import --quiet \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' \
      --change 'CMD ["python3"]' \
      "$STANDIN_TAR" "$STANDIN_IMAGE" >/dev/null
    note "imported as $STANDIN_IMAGE in $(elapsed "$t")"
  fi
fi
note "base python: $("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network none "$base" \
  sh -c 'command -v python; python --version; pip --version' | paste -sd ' ' -)"

# --- 3. build ---------------------------------------------------------------------------------
step "build $IMAGE"
REVISION="$(git rev-parse HEAD)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml | head -1)"
BUILD_MOUNTS=()
# The machine's CA bundle, for pip behind a TLS-intercepting proxy (see the header).
host_ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
if [[ -r "$host_ca" ]]; then
  # Debian's pip uses the system bundle; the official image's pip its vendored certifi one.
  certifi="$("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network none "$base" \
    python -c 'import pip._vendor.certifi as c; print(c.where())' 2>/dev/null || true)"
  for target in $(printf '%s\n' /etc/ssl/certs/ca-certificates.crt "$certifi" | sort -u); do
    if "${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network none "$base" test -f "$target"; then
      BUILD_MOUNTS+=(--volume "$host_ca:$target:ro")
      note "build steps trust this machine's CA bundle: $host_ca mounted on $target"
    fi
  done
fi
# A package index configured on this machine, if any (none: PyPI, as everywhere).
index_url="${PIP_INDEX_URL:-$(sed -n 's/^[[:space:]]*index-url[[:space:]]*=[[:space:]]*//p' \
  /etc/pip.conf /etc/xdg/pip/pip.conf "${HOME:-/root}/.config/pip/pip.conf" 2>/dev/null | head -1)}"
if [[ -n "$index_url" || -n "${PIP_EXTRA_INDEX_URL:-}" ]]; then
  {
    echo "[global]"
    [[ -n "$index_url" ]] && echo "index-url = $index_url"
    [[ -n "${PIP_EXTRA_INDEX_URL:-}" ]] && echo "extra-index-url = $PIP_EXTRA_INDEX_URL"
    [[ -n "${PIP_TRUSTED_HOST:-}" ]] && echo "trusted-host = $PIP_TRUSTED_HOST"
  } >"$work/pip.conf"
  BUILD_MOUNTS+=(--volume "$work/pip.conf:/etc/pip.conf:ro")
  note "pip index from this machine's configuration passed to the build"
fi
t=$(date +%s)
previous="$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)"
# --network host: the RUN steps reach PyPI the way this machine does (no bridge, no NAT rules).
# --no-cache: buildah caches `RUN --mount=type=bind,from=build` by its text, not by what the
# build stage produced, so a cached runtime stage would keep the previous wheels, i.e. the
# previous code (buildah issue 4522, podman issue 17119; seen here with buildah 1.28).
# --layers=false: no intermediate images left behind.
if ! "${PODMAN[@]}" build --format docker --no-cache --layers=false --network host --pull=never "${ULIMITS[@]}" \
  "${BUILD_MOUNTS[@]}" \
  --build-arg "PYTHON_IMAGE=$base" \
  --build-arg "VERSION=$VERSION" \
  --build-arg "REVISION=$REVISION" \
  ${SOURCE:+--build-arg "SOURCE=$SOURCE"} \
  --tag "$IMAGE" . >"$work/build.log" 2>&1; then
  tail -40 "$work/build.log" >&2
  die "podman build failed"
fi
built="$("${PODMAN[@]}" image inspect --format '{{.Id}}' "$IMAGE")"
note "built in $(elapsed "$t"): ${built:0:12}, $("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
# The previous check's image, now untagged, would pile up: drop it (unless something uses it).
if [[ -n "$previous" && "$previous" != "$built" ]]; then
  "${PODMAN[@]}" rmi "$previous" >/dev/null 2>&1 || true
fi

# --- 4. run -----------------------------------------------------------------------------------
step "run: generated key, read-only, no capabilities, 127.0.0.1 only"
key="$("${PODMAN[@]}" run --rm "${ULIMITS[@]}" --network none "$IMAGE" gen-key)"
[[ ${#key} -ge 32 ]] || die "gen-key printed no key"
cat >"$work/gateway.yaml" <<EOF
listen: {host: 127.0.0.1, port: $GW_PORT, drain_timeout: $DRAIN_TIMEOUT}
logging: {json: true}
routes:
  - name: demo
    path: /mcp
    backend: {url: "http://127.0.0.1:$BACKEND_PORT/mcp"}
EOF
chmod 644 "$work/gateway.yaml"
# Like the chart's securityContext: read-only root with an emptyDir (here a tmpfs) on /tmp only,
# every capability dropped, no privilege escalation; the image's own user (uid 10001).
RUN_OPTS=(--read-only --read-only-tmpfs=false --tmpfs "/tmp:rw,nosuid,nodev,size=16m"
  --cap-drop ALL --security-opt no-new-privileges "${ULIMITS[@]}")
"${PODMAN[@]}" run --detach --name "$GW_NAME" "${RUN_OPTS[@]}" \
  --network host \
  --volume "$work/gateway.yaml:/etc/mrtr-gateway/gateway.yaml:ro" \
  --env "MRTR_GATEWAY_STATE_KEYS=$key" \
  "$IMAGE" >/dev/null
# The bundled legacy demo server, on the host's loopback too. Host network for both: a container on
# podman's default bridge turns IP forwarding on and adds NAT chains to the host, which stay.
"${PODMAN[@]}" run --detach --name "$BE_NAME" "${RUN_OPTS[@]}" --network host \
  --entrypoint python "$IMAGE" -m gateway.demo.backend --port "$BACKEND_PORT" >/dev/null
GW="http://127.0.0.1:$GW_PORT"
note "gateway $GW_NAME on $GW, demo server $BE_NAME on 127.0.0.1:$BACKEND_PORT (host network)"

poll_200() { # URL: until it answers 200, at most 30 s
  for _ in $(seq 150); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' "$1" 2>/dev/null)" == 200 ]] && return 0
    sleep 0.2
  done
  return 1
}
check "GET /healthz -> 200" poll_200 "$GW/healthz"
check "GET /readyz -> 200" poll_200 "$GW/readyz"

call() { # ID TOOL PARAMS-JSON: POST one 2026-07-28 tools/call; prints the HTTP status
  curl -s -o "$work/body" -w '%{http_code}' "$GW/mcp" \
    -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H "Mcp-Name: $2" \
    --data "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":$3}"
}
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}'
add_ok() {
  local status text
  for _ in $(seq 25); do # the demo server may still be starting
    status="$(call 1 add "{\"name\":\"add\",\"arguments\":{\"a\":2,\"b\":3},$meta}")"
    text="$(jq -r '.result.content[0].text // empty' "$work/body" 2>/dev/null)"
    [[ "$status" == 200 && "$text" == 5 ]] && { note "tools/call add(2, 3) -> $status, \"$text\""; return 0; }
    sleep 0.2
  done
  note "tools/call add -> $status $(head -c 300 "$work/body")"
  return 1
}
check "tools/call through the gateway to the demo server" add_ok

uid_ok() {
  local uid uids pid1
  uid="$("${PODMAN[@]}" exec "$GW_NAME" id -u)"
  # Real, effective, saved and filesystem uid of every process in the container (this exec too).
  uids="$("${PODMAN[@]}" exec "$GW_NAME" sh -c 'cat /proc/[0-9]*/status 2>/dev/null; true' | awk '/^Uid:/ {print $2, $3, $4, $5}' | tr ' ' '\n' | sort -u | paste -sd, -)"
  pid1="$("${PODMAN[@]}" exec "$GW_NAME" sh -c 'tr "\0" " " </proc/1/cmdline')"
  pid1="${pid1% }"
  note "exec id -u: $uid; uids of all processes: $uids; PID 1: $pid1"
  [[ "$uid" == 10001 && "$uids" == 10001 && "$pid1" == "dumb-init --single-child -- mrtr-gateway serve "* ]]
}
check "runs as uid 10001, dumb-init as PID 1" uid_ok

readonly_ok() {
  local out
  [[ "$("${PODMAN[@]}" inspect --format '{{.HostConfig.ReadonlyRootfs}}' "$GW_NAME")" == true ]] || return 1
  # As root too: the container's own user could not write to / anyway, root proves the mount.
  if out="$("${PODMAN[@]}" exec --user 0 "$GW_NAME" sh -c 'touch /probe && echo wrote' 2>&1)"; then
    note "a write to / succeeded: $out"
    return 1
  fi
  note "touch /probe (as root in the container): ${out##*: }"
  [[ "$out" == *"Read-only file system"* ]]
}
check "root filesystem is read-only" readonly_ok

health_ok() {
  local cmd
  cmd="$("${PODMAN[@]}" image inspect --format '{{json .Config.Healthcheck.Test}}' "$IMAGE")"
  note "image HEALTHCHECK: $cmd"
  [[ "$cmd" == *healthcheck* ]] && "${PODMAN[@]}" healthcheck run "$GW_NAME"
}
check "HEALTHCHECK passes (podman healthcheck run)" health_ok

labels_ok() {
  local labels
  labels="$("${PODMAN[@]}" image inspect --format '{{json .Labels}}' "$IMAGE")"
  jq -r 'to_entries[] | select(.key | startswith("org.opencontainers.image.")) | "   \(.key)=\(.value)"' <<<"$labels"
  jq -e --arg rev "$REVISION" --arg ver "$VERSION" '
    .["org.opencontainers.image.title"] == "mrtr-gateway"
    and .["org.opencontainers.image.version"] == $ver
    and .["org.opencontainers.image.revision"] == $rev
    and (.["org.opencontainers.image.licenses"] | length > 0)
    and (.["org.opencontainers.image.description"] | length > 0)
    and has("org.opencontainers.image.source")' <<<"$labels" >/dev/null
}
check "OCI labels (title, version, revision = HEAD, licenses, description, source)" labels_ok

# --- the drain: a held call, SIGTERM through podman stop, the retry still served ----------------
step "drain: podman stop -t $STOP_TIMEOUT with a call held for the user's answer"
held_ok=false
status="$(call 2 ask_city "{\"name\":\"ask_city\",\"arguments\":{},$meta}")"
state="$(jq -r '.result.requestState // empty' "$work/body" 2>/dev/null)"
input_key="$(jq -r '.result.inputRequests // {} | keys[0] // empty' "$work/body" 2>/dev/null)"
if [[ "$status" == 200 && -n "$state" && -n "$input_key" ]]; then
  held_ok=true
  note "tools/call ask_city -> $status, input required: the call is held in the gateway"
fi
check "a call is held before the stop" $held_ok

stop_started=$(date +%s.%N)
"${PODMAN[@]}" stop --time "$STOP_TIMEOUT" "$GW_NAME" >"$work/stop.log" 2>&1 &
stop_pid=$!
draining_ok() {
  local code
  for _ in $(seq 100); do
    code="$(curl -s -o "$work/readyz" -w '%{http_code}' "$GW/readyz" 2>/dev/null || true)"
    [[ "$code" == 503 ]] && { note "GET /readyz during the drain -> 503 $(cat "$work/readyz")"; return 0; }
    sleep 0.05
  done
  return 1
}
check "/readyz turns 503 on SIGTERM" draining_ok
retry_ok() {
  local answer status text
  $held_ok || return 1
  answer="{\"$input_key\":{\"action\":\"accept\",\"content\":{\"city\":\"Oslo\"}}}"
  status="$(call 3 ask_city "{\"name\":\"ask_city\",\"arguments\":{},\"inputResponses\":$answer,\"requestState\":\"$state\",$meta}")"
  text="$(jq -r '.result.content[0].text // empty' "$work/body" 2>/dev/null)"
  note "retry of the held call during the drain -> $status, \"$text\""
  [[ "$status" == 200 && "$text" == *Oslo* ]]
}
check "the held call's retry completes during the drain" retry_ok
stop_rc=0
wait "$stop_pid" || stop_rc=$?
stop_seconds="$(awk -v a="$stop_started" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')"
exit_code="$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$GW_NAME")"
note "podman stop returned $stop_rc after ${stop_seconds}s; container exit code $exit_code"
check "exits with code 0 before the drain timeout (${DRAIN_TIMEOUT}s)" \
  test "$stop_rc" = 0 -a "$exit_code" = 0 -a "${stop_seconds%.*}" -lt "$DRAIN_TIMEOUT"

"${PODMAN[@]}" logs "$GW_NAME" >"$work/gateway.log" 2>&1
note "gateway log lines: $(jq -R -r 'fromjson? | select(.event | test("^(listening|drain_|shutdown)")) | "\(.event)\(if .drained != null then " drained=\(.drained)" else "" end)\(if .event_loop != null then " event_loop=\(.event_loop)" else "" end)"' "$work/gateway.log" | paste -sd, -)"
logs_ok() {
  grep -q '"drain_started"' "$work/gateway.log" \
    && jq -R -n -e '[inputs | fromjson? | select(.event == "drain_ended" and .drained == true)] | length > 0' "$work/gateway.log" >/dev/null \
    && ! grep -q -E 'Traceback|shutdown_timed_out|"level": ?"(error|critical)"' "$work/gateway.log"
}
check "logs: drain_started, drain_ended drained=true, no traceback or error" logs_ok
# (jq -e on a stream answers for its last input only: the lines are gathered into one array first)
uvloop_ok() { # the image installs the uvloop extra: listen.event_loop auto takes it
  jq -R -n -e '[inputs | fromjson? | select(.event == "listening" and .event_loop == "uvloop")] | length > 0' "$work/gateway.log" >/dev/null
}
check "serves on uvloop (listen.event_loop: auto, the extra installed)" uvloop_ok
if grep -q -E 'Traceback|"level": ?"(error|critical)"' "$work/gateway.log"; then
  sed -n '1,40p' "$work/gateway.log"
fi

# --- the host as found ------------------------------------------------------------------------
step "host state: unchanged by the check"
"${PODMAN[@]}" rm --force --time 0 "$BE_NAME" "$GW_NAME" >/dev/null 2>&1 || true
host_after="$(host_state)"
host_unchanged() {
  [[ "$host_before" == "$host_after" ]] && return 0
  diff <(echo "$host_before") <(echo "$host_after") | sed 's/^/   /'
  return 1
}
note "$(echo "$host_before" | paste -sd' ' -)"
check "no sysctl, link or firewall chain left changed on the host" host_unchanged

# --- 5. summary -------------------------------------------------------------------------------
step "summary ($(elapsed "$started_all") in all)"
note "image $IMAGE on base $base"
printf '   %s\n' "${results[@]}"
total=${#results[@]}
echo "$((total - failed)) passed, $failed failed"
((failed == 0))
