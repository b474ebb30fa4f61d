# Sourced by ../build: Cluster API from its Go modules (sigs.k8s.io/cluster-api, /api, /test at one
# version; the test module's placeholder requirements resolved by `replace` pins in go.mod).
#
# OUT/capi-<version>-<hash>/
#   config/<provider>/crd/*.yaml       the providers' CRDs (core, bootstrap-kubeadm,
#   config/<provider>/crd/kustomization.yaml   controlplane-kubeadm, docker), the labels their
#                                      kustomization puts on them (the contract versions CAPI
#                                      reads), and their webhook manifests:
#   config/<provider>/webhook/manifests.yaml
#   bin/                               with --capi: cluster-api, kubeadm-bootstrap,
#                                      kubeadm-control-plane, capd (CAPD, whose in-memory backend
#                                      needs no Docker)
# The CRDs are always collected (the tests install them); the binaries only with --capi.

cdir="$here/capi"
capi_version="$(module_version "$cdir" sigs.k8s.io/cluster-api)"
ckey="capi-$capi_version-$(cat "$cdir/go.mod" "$cdir/go.sum" "$cdir/build.sh" "$0" | sha256sum | cut -c1-12)"
cdest="$out/$ckey"

if [ ! -f "$cdest/.complete-config" ]; then
  echo "build: $ckey: collecting the providers' CRDs and webhook manifests" >&2
  (cd "$cdir" && go mod download sigs.k8s.io/cluster-api sigs.k8s.io/cluster-api/test)
  core_dir="$(cd "$cdir" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)"
  test_dir="$(cd "$cdir" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api/test)"
  ctmp="$cdest.config.$$"
  rm -rf "$ctmp"
  for spec in "core=$core_dir/core/config" \
              "bootstrap-kubeadm=$core_dir/bootstrap/kubeadm/config" \
              "controlplane-kubeadm=$core_dir/controlplane/kubeadm/config" \
              "docker=$test_dir/infrastructure/docker/config"; do
    name="${spec%%=*}"
    src="${spec#*=}"
    mkdir -p "$ctmp/$name/crd" "$ctmp/$name/webhook"
    cp "$src"/crd/bases/*.yaml "$ctmp/$name/crd/"
    cp "$src/crd/kustomization.yaml" "$ctmp/$name/crd/kustomization.yaml"
    cp "$src/webhook/manifests.yaml" "$ctmp/$name/webhook/"
  done
  chmod -R u+w "$ctmp"
  mkdir -p "$cdest"
  rm -rf "$cdest/config"
  mv "$ctmp" "$cdest/config"
  touch "$cdest/.complete-config"
fi

if $capi && [ ! -f "$cdest/.complete-bin" ]; then
  echo "build: $ckey: building the managers (a cold build takes minutes)" >&2
  cstart=$SECONDS
  cminor="$(echo "$capi_version" | cut -d. -f2)"
  cldflags="-s -w"
  p=sigs.k8s.io/cluster-api/version
  cldflags="$cldflags -X $p.gitVersion=$capi_version -X $p.gitMajor=1 -X $p.gitMinor=$cminor"
  cldflags="$cldflags -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  cbin="$cdest/bin.tmp.$$"
  rm -rf "$cbin"
  mkdir -p "$cbin"
  for spec in cluster-api=sigs.k8s.io/cluster-api/core \
              kubeadm-bootstrap=sigs.k8s.io/cluster-api/bootstrap/kubeadm \
              kubeadm-control-plane=sigs.k8s.io/cluster-api/controlplane/kubeadm \
              capd=sigs.k8s.io/cluster-api/test/infrastructure/docker; do
    (cd "$cdir" && go build -trimpath -ldflags "$cldflags" -o "$cbin/${spec%%=*}" "${spec#*=}")
  done
  rm -rf "$cdest/bin"
  mv "$cbin" "$cdest/bin"
  touch "$cdest/.complete-bin"
  echo "build: $ckey: built in $((SECONDS - cstart)) s" >&2
fi
if $capi; then
  links+=("$cdest/bin/"*)
fi
