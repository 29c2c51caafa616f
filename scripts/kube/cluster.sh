# shellcheck shell=bash
# A one-node Kubernetes 1.20 cluster on this machine, for scripts/kube-e2e.sh (sourced, not run).
#
#   kube_snapshot FILE     the host state that the cluster may change (sysctls, iptables rules,
#                          links, addresses, routes, mounts, network namespaces, cgroups, paths)
#   kube_up                etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd,
#                          kubelet, kube-proxy and a small cluster DNS, all listening on 127.0.0.1 or
#                          on the pod bridge's own address; certs, tokens and data in $KT
#   kube_down              everything stopped and removed again: pods, processes, shims, mounts,
#                          the bridge, iptables chains and rules, cgroups, files; sysctls restored
#                          from the snapshot
#
# Needs (from scripts/kube/build.sh): KUBE_BIN, KUBE_TOOLS, PAUSE_IMAGE; and KT, a fresh temporary
# directory. Sets KUBECONFIG-free helpers: kc (kubectl) and hm (helm) bound to this cluster.
#
# The network stays on this machine: the pod bridge $KBR (10.244.77.1/24) has no masquerade to the
# outside, a chain of our own drops whatever would be forwarded from or to it other than between
# its own ports, another lets pods reach the host only for DNS and answers, Service IPs (10.96.77.0/24) are routed to the bridge, and kube-proxy runs in
# iptables mode with --masquerade-all (the replies of pod -> Service -> pod come back through the
# host). No DNS server forwards anything: scripts/kube/dns.py answers only Service names.

KBR="${KBR:-mrtrk0}"
POD_NET=10.244.77
POD_CIDR="$POD_NET.0/24"
NODE_IP="$POD_NET.1"
SVC_CIDR=10.96.77.0/24
NODE_NAME=mrtr-node
FWD_CHAIN=MRTR-KUBE-FWD
IN_CHAIN=MRTR-KUBE-IN
KPIDS=() # pid:name of every daemon started

klog() { printf '   [cluster] %s\n' "$*" >&2; }
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
kc() { "$KUBE_TOOLS/kubectl" --kubeconfig "$KT/admin.kubeconfig" --cache-dir "$KT/kubectl-cache" "$@"; }
hm() {
  HELM_CACHE_HOME="$KT/helm/cache" HELM_CONFIG_HOME="$KT/helm/config" HELM_DATA_HOME="$KT/helm/data" \
    "$KUBE_TOOLS/helm" --kubeconfig "$KT/admin.kubeconfig" "$@"
}
ctr_k8s() { ctr --address "$KT/containerd/containerd.sock" -n k8s.io "$@"; }

# --- the host's state ----------------------------------------------------------------------------
# Sysctls whose values move on their own (counters, random, timestamps) are left out.
SYSCTL_VOLATILE='^(fs\.(dentry-state|file-nr|inode-nr|inode-state|quota\.)|kernel\.(random\.|ns_last_pid|pty\.nr|tainted|sched_domain|perf_event_max_sample_rate|osrelease|core_modes)|net\.netfilter\.nf_conntrack_count|net\.ipv[46]\.(route\.gc_|neigh\.)|net\.ipv6\.route\.|vm\.(stat_refresh|drop_caches|compact_memory)|dev\.|fs\.binfmt_misc\.)'
KPATHS=(/var/log/pods /var/log/containers /run/containerd /var/lib/containerd /var/lib/kubelet /var/lib/cni
  /opt/cni /opt/containerd /run/netns /var/run/netns /etc/kubernetes /var/run/kubernetes /usr/libexec/kubernetes
  /etc/cni/net.d /run/flannel /var/lib/calico)
# (Multi-line values, such as kernel.core_modes's, keep their first line only: the others have no ' = '.)
kube_sysctls() { sysctl -a 2>/dev/null | grep -F ' = ' | grep -v -E "$SYSCTL_VOLATILE" | LC_ALL=C sort; }
kube_snapshot() {
  {
    kube_sysctls | sed 's/^/sysctl /'
    local t
    for t in filter nat mangle raw; do
      iptables-save -t "$t" 2>/dev/null | grep -v -E '^(#|COMMIT)' | sed -E 's/\[[0-9]+:[0-9]+\]//' | sed "s/^/ip4 $t /"
      ip6tables-save -t "$t" 2>/dev/null | grep -v -E '^(#|COMMIT)' | sed -E 's/\[[0-9]+:[0-9]+\]//' | sed "s/^/ip6 $t /"
    done
    ip -o link show | awk -F': ' '{split($2, n, "@"); print "link " n[1] " " $3}' | sed -E 's/ (qlen|state|mode|group) .*//' 
    ip -o addr show | awk '{print "addr " $2 " " $3 " " $4}'
    ip route show table all 2>/dev/null | sed 's/^/route4 /'
    ip -6 route show table all 2>/dev/null | grep -v -E '^(local|multicast|anycast) ' | sed 's/^/route6 /'
    awk '{print "mount " $5 " " $9}' /proc/self/mountinfo | LC_ALL=C sort
    ip netns list 2>/dev/null | sed 's/^/netns /'
    find /sys/fs/cgroup -mindepth 1 -maxdepth 2 -type d 2>/dev/null | LC_ALL=C sort | sed 's/^/cgroup /'
    local p
    for p in "${KPATHS[@]}"; do
      if [[ -e "$p" ]]; then find "$p" -maxdepth 1 | LC_ALL=C sort | sed 's/^/path /'; fi
    done
  } >"$1"
}

# --- certificates and kubeconfig -----------------------------------------------------------------
kube_pki() {
  local d="$KT/pki"
  mkdir -p "$d"
  (
    cd "$d" || exit 1
    ec() { openssl ecparam -name prime256v1 -genkey -noout -out "$1.key" 2>/dev/null; }
    ec ca
    openssl req -x509 -new -key ca.key -out ca.crt -days 2 -subj /CN=mrtr-kube-ca 2>/dev/null
    sign() { # NAME SUBJECT SAN-or-empty USAGE
      ec "$1"
      openssl req -new -key "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      { echo "basicConstraints=CA:FALSE"; echo "keyUsage=digitalSignature,keyEncipherment"; echo "extendedKeyUsage=$4"
        [[ -n "$3" ]] && echo "subjectAltName=$3"; } >"$1.ext"
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 -extfile "$1.ext" 2>/dev/null
    }
    sign apiserver /CN=kube-apiserver "IP:127.0.0.1,IP:$NODE_IP,IP:${SVC_CIDR%.0/24}.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local" serverAuth
    sign kubelet "/CN=$NODE_NAME" "IP:$NODE_IP,IP:127.0.0.1,DNS:$NODE_NAME" serverAuth
    sign admin "/O=system:masters/CN=mrtr-admin" "" clientAuth
    ec sa
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  cat >"$KT/admin.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: mrtr
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$d/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$d/admin.crt", client-key: "$d/admin.key"}
contexts:
- name: mrtr
  context: {cluster: mrtr, user: admin, namespace: default}
current-context: mrtr
EOF
}

kube_start() { # NAME COMMAND...: in the background, its own log
  local name="$1"
  shift
  "$@" >"$KT/logs/$name.log" 2>&1 &
  KPIDS+=("$!:$name")
  echo "$!:$name" >>"$KT/pids"
}
kube_wait() { # WHAT SECONDS COMMAND...
  local what="$1" seconds="$2" i
  shift 2
  for ((i = 0; i < seconds * 5; i++)); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  klog "timed out after ${seconds}s waiting for $what"
  return 1
}
kube_alive() { local e; for e in "${KPIDS[@]}"; do kill -0 "${e%%:*}" 2>/dev/null || { klog "${e#*:} exited: $(tail -5 "$KT/logs/${e#*:}.log")"; return 1; }; done; }

# --- up ------------------------------------------------------------------------------------------
kube_up() {
  mkdir -p "$KT/logs" "$KT/etcd" "$KT/containerd" "$KT/kubelet" "$KT/cni/net.d" "$KT/cni/ipam" "$KT/kubectl-cache" "$KT/helm"
  ETCD_PORT=$(free_port) ETCD_PEER=$(free_port) API_PORT=$(free_port) KUBELET_PORT=$(free_port)
  KUBELET_HEALTHZ=$(free_port) PROXY_HEALTHZ=$(free_port) PROXY_METRICS=$(free_port)
  kube_pki

  # The pod bridge, made here (not by the CNI plugin) so that its address is the node's from the
  # start; Service IPs routed to it; the forward fence.
  ip link add "$KBR" type bridge
  ip addr add "$NODE_IP/24" dev "$KBR"
  ip link set "$KBR" up
  ip route add "$SVC_CIDR" dev "$KBR" src "$NODE_IP"
  iptables -N "$FWD_CHAIN"
  iptables -A "$FWD_CHAIN" -i "$KBR" -o "$KBR" -j ACCEPT
  iptables -A "$FWD_CHAIN" -i "$KBR" -j DROP
  iptables -A "$FWD_CHAIN" -o "$KBR" -j DROP
  iptables -I FORWARD 1 -j "$FWD_CHAIN"
  # From the pods to the host itself: the DNS and answers to the host's own connections, nothing else.
  iptables -N "$IN_CHAIN"
  iptables -A "$IN_CHAIN" -i "$KBR" -d "$NODE_IP" -p udp --dport 53 -j ACCEPT
  iptables -A "$IN_CHAIN" -i "$KBR" -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT
  iptables -A "$IN_CHAIN" -i "$KBR" -j DROP
  iptables -I INPUT 1 -j "$IN_CHAIN"

  kube_start etcd etcd --name mrtr --data-dir "$KT/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
    --initial-cluster "mrtr=http://127.0.0.1:$ETCD_PEER" --log-level warn
  kube_wait etcd 30 curl -sf "http://127.0.0.1:$ETCD_PORT/health" || return 1

  local pki="$KT/pki"
  kube_start kube-apiserver "$KUBE_BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --secure-port "$API_PORT" --insecure-port 0 --advertise-address "$NODE_IP" \
    --service-cluster-ip-range "$SVC_CIDR" --client-ca-file "$pki/ca.crt" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
    --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
    --authorization-mode AlwaysAllow --anonymous-auth=false --profiling=false \
    --cert-dir "$KT/apiserver-certs" --endpoint-reconciler-type none
  kube_wait kube-apiserver 60 kc get --raw /readyz || { tail -20 "$KT/logs/kube-apiserver.log" >&2; return 1; }

  kube_start kube-controller-manager "$KUBE_BIN/kube-controller-manager" --kubeconfig "$KT/admin.kubeconfig" \
    --port 0 --secure-port 0 --leader-elect=false --use-service-account-credentials=false \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" --profiling=false
  kube_start kube-scheduler "$KUBE_BIN/kube-scheduler" --kubeconfig "$KT/admin.kubeconfig" \
    --port 0 --secure-port 0 --leader-elect=false --profiling=false

  # containerd, all of its paths under $KT; netns mounts under its state dir, not /run/netns.
  cat >"$KT/containerd/config.toml" <<EOF
version = 2
root = "$KT/containerd/root"
state = "$KT/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$KT/containerd/containerd.sock"
[ttrpc]
  address = "$KT/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$KT/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$KT/cni/net.d"
    max_conf_num = 1
EOF
  cat >"$KT/cni/net.d/10-mrtr.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "mrtr-pods", "plugins": [
  {"type": "bridge", "bridge": "$KBR", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$KT/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}}]}
EOF
  kube_start containerd containerd --config "$KT/containerd/config.toml"
  kube_wait containerd 30 ctr --address "$KT/containerd/containerd.sock" version || return 1
  ctr_k8s images import --all-platforms "$KUBE_BIN/pause.oci.tar" >/dev/null || { klog "pause image import failed"; return 1; }

  cat >"$KT/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ
tlsCertFile: $pki/kubelet.crt
tlsPrivateKeyFile: $pki/kubelet.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
# Secret and ConfigMap volumes follow their objects at each pod sync: 20 s here, 1 min by default.
syncFrequency: 20s
volumePluginDir: $KT/kubelet/volume-plugins
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: ""
maxPods: 30
EOF
  kube_start kubelet "$KUBE_BIN/kubelet" --config "$KT/kubelet/config.yaml" --kubeconfig "$KT/admin.kubeconfig" \
    --container-runtime remote --container-runtime-endpoint "unix://$KT/containerd/containerd.sock" \
    --root-dir "$KT/kubelet" --cert-dir "$KT/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" \
    --pod-infra-container-image "$PAUSE_IMAGE"
  kube_start kube-proxy "$KUBE_BIN/kube-proxy" --kubeconfig "$KT/admin.kubeconfig" --hostname-override "$NODE_NAME" \
    --proxy-mode iptables --masquerade-all --cluster-cidr "$POD_CIDR" --bind-address 127.0.0.1 \
    --healthz-bind-address "127.0.0.1:$PROXY_HEALTHZ" --metrics-bind-address "127.0.0.1:$PROXY_METRICS" \
    --nodeport-addresses "$NODE_IP/32" --oom-score-adj 0 --conntrack-max-per-core 0 \
    --conntrack-tcp-timeout-established 0 --conntrack-tcp-timeout-close-wait 0 --profiling=false
  kube_start dns python3 "$KUBE_HERE/dns.py" --listen "$NODE_IP" --kubectl "$KUBE_TOOLS/kubectl" \
    --kubeconfig "$KT/admin.kubeconfig"
  kube_wait "node Ready" 120 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout 1s \
    || { tail -20 "$KT/logs/kubelet.log" >&2; return 1; }
  kube_wait "default ServiceAccount" 60 kc -n default get serviceaccount default || return 1
  kube_alive
}

# --- down ----------------------------------------------------------------------------------------
kube_stop_pid() { # PID NAME SECONDS
  local pid="$1" i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < $3 * 10; i++)); do kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }; sleep 0.1; done
  klog "$2 ($pid) did not stop on SIGTERM within $3s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
kube_pid_of() { local e; for e in "${KPIDS[@]}"; do [[ "${e#*:}" == "$1" ]] && echo "${e%%:*}"; done; }
# Processes that belong to this cluster but are not our children: containerd's shims (they hold
# our socket path) and everything in the kubepods cgroups.
kube_strays() {
  local p
  for p in /proc/[0-9]*; do
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -q -F -- "$KT/" && echo "${p#/proc/}"
  done
  cat /sys/fs/cgroup/pids/kubepods/cgroup.procs /sys/fs/cgroup/pids/kubepods/*/cgroup.procs \
    /sys/fs/cgroup/pids/kubepods/*/*/cgroup.procs /sys/fs/cgroup/pids/kubepods/*/*/*/cgroup.procs \
    /sys/fs/cgroup/memory/kubepods/cgroup.procs /sys/fs/cgroup/memory/kubepods/*/cgroup.procs \
    /sys/fs/cgroup/memory/kubepods/*/*/cgroup.procs /sys/fs/cgroup/memory/kubepods/*/*/*/cgroup.procs 2>/dev/null
}

kube_down() {
  local t0=$SECONDS pid ns
  # 1. Pods first, while the kubelet still runs: it stops the containers and the CNI plugin
  #    removes their veths and addresses.
  if [[ -n "$(kube_pid_of kubelet)" ]] && kc get --raw /readyz >/dev/null 2>&1; then
    for ns in $(kc get namespaces -o name 2>/dev/null | sed 's|namespace/||' | grep -v -E '^(default|kube-system|kube-public|kube-node-lease)$'); do
      kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
    done
    kc delete pods --all --all-namespaces --grace-period 0 --force >/dev/null 2>&1 || true
    for _ in $(seq 60); do
      [[ -z "$(kc get pods --all-namespaces -o name 2>/dev/null)" ]] && [[ -z "$(ctr_k8s tasks ls -q 2>/dev/null)" ]] && break
      sleep 0.5
    done
  fi
  # 2. kube-proxy's rules, then the daemons (kubelet before containerd, apiserver before etcd).
  for name in dns kube-proxy kube-scheduler kube-controller-manager kubelet; do
    pid="$(kube_pid_of "$name")"
    [[ -n "$pid" ]] && kube_stop_pid "$pid" "$name" 10
  done
  [[ -x "$KUBE_BIN/kube-proxy" ]] && "$KUBE_BIN/kube-proxy" --cleanup --proxy-mode iptables >"$KT/logs/kube-proxy-cleanup.log" 2>&1 || true
  # Sandboxes or containers the kubelet left behind (a run that failed half-way): stop them through
  # containerd's API while it still runs.
  if [[ -S "$KT/containerd/containerd.sock" ]]; then
    local c
    for c in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks kill -s SIGKILL "$c" >/dev/null 2>&1 || true; done
    sleep 0.5
    for c in $(ctr_k8s tasks ls -q 2>/dev/null); do ctr_k8s tasks delete -f "$c" >/dev/null 2>&1 || true; done
    for c in $(ctr_k8s containers ls -q 2>/dev/null); do ctr_k8s containers delete "$c" >/dev/null 2>&1 || true; done
  fi
  for name in containerd kube-apiserver etcd; do
    pid="$(kube_pid_of "$name")"
    [[ -n "$pid" ]] && kube_stop_pid "$pid" "$name" 15
  done
  # 3. Stray processes (shims, container processes), by pid.
  local strays
  for _ in 1 2 3; do
    strays="$(kube_strays | sort -u | grep -v -x -e "$$" -e "$BASHPID" || true)"
    [[ -z "$strays" ]] && break
    klog "killing stray processes: $(echo "$strays" | paste -sd' ' -)"
    # shellcheck disable=SC2086
    kill -KILL $strays 2>/dev/null || true
    sleep 0.5
  done
  # 4. Mounts under $KT (sandbox shm, netns, overlay rootfs, volumes), deepest first.
  local m
  for _ in 1 2 3; do
    m="$(awk -v t="$KT/" 'index($5, t) == 1 {print $5}' /proc/self/mountinfo | sort -r)"
    [[ -z "$m" ]] && break
    while read -r mp; do [[ -n "$mp" ]] && umount -l "$mp" 2>/dev/null || true; done <<<"$m"
  done
  # 5. Links: veths on the bridge, then the bridge (its route goes with it).
  local l
  for l in $(ip -o link show master "$KBR" 2>/dev/null | awk -F': ' '{split($2, n, "@"); print n[1]}'); do
    ip link delete "$l" 2>/dev/null || true
  done
  ip link delete "$KBR" 2>/dev/null || true
  # 6. iptables: every jump to a KUBE-/CNI-/our chain, then the chains themselves.
  local ipt table rule chain
  for ipt in iptables ip6tables; do
    for table in filter nat mangle raw; do
      "$ipt" -t "$table" -S 2>/dev/null | grep -E '^-A ' | grep -E -- "-j (KUBE-|CNI-|MRTR-KUBE-)" \
        | grep -v -E '^-A (KUBE-|CNI-|MRTR-)' | while read -r rule; do
          # shellcheck disable=SC2086
          eval "$ipt -t $table ${rule/-A /-D }" 2>/dev/null || true
        done
      for chain in $("$ipt" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^(KUBE-|CNI-|MRTR-KUBE-)/) {print $2}'); do
        "$ipt" -t "$table" -F "$chain" 2>/dev/null || true
      done
      for chain in $("$ipt" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && ($2 ~ /^(KUBE-|CNI-|MRTR-KUBE-)/) {print $2}'); do
        "$ipt" -t "$table" -X "$chain" 2>/dev/null || true
      done
    done
  done
  # 7. cgroups the kubelet made (kubepods and below), deepest first, in every hierarchy.
  local cg
  for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [[ -d "$cg" ]] && find "$cg" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # 8. Files the kubelet and containerd write outside $KT (their paths are fixed in 1.20):
  #    only what was not there before.
  local p
  for p in "${KPATHS[@]}"; do
    [[ -e "$p" ]] || continue
    if ! grep -q -x -F "path $p" "$KT/host-before"; then
      rm -rf "$p"
    else
      find "$p" -mindepth 1 -maxdepth 1 | while read -r e; do
        grep -q -x -F "path $e" "$KT/host-before" || rm -rf "$e"
      done
    fi
  done
  # 9. sysctls back to their values before the run (the kubelet sets kernel.panic*, vm.overcommit_memory
  #    and others, the bridge plugin net.ipv4.ip_forward, kube-proxy route_localnet).
  local key val now
  while read -r key val; do
    now="$(sysctl -n "$key" 2>/dev/null | tr '\t' ' ')" || continue
    if [[ "$now" != "$val" ]]; then
      sysctl -q -w "$key=$val" >/dev/null 2>&1 && KRESTORED+=("$key: $now -> $val") || KRESTORED+=("$key: $now -> $val FAILED")
    fi
  done < <(sed -n 's/^sysctl \([^ ]*\) = \(.*\)$/\1 \2/p' "$KT/host-before" | tr '\t' ' ')
  klog "torn down in $((SECONDS - t0))s"
}
KRESTORED=()
