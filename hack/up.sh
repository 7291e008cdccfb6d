#!/usr/bin/env bash
# make apiserver: build, start the standalone local API server (etcd + kube-apiserver, as
# the integration tests use it) and print how to reach it.

source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit
cmake --preset release >/dev/null
cmake --build --preset release
kubeconfig=$(hack/apiserver.sh start)
kubectl=$CACHE_DIR/bin/kubectl
note=""
if [ ! -x "$kubectl" ]; then
	kubectl=kubectl
	note="  (no kubectl built yet: hack/build-k8s.sh kubectl puts one in .cache/bin)"
fi
cat <<MSG

The local API server is up.
  kubeconfig: $kubeconfig
  try:        KUBECONFIG=$kubeconfig $kubectl get namespaces
$note
  shell:      eval "\$(hack/apiserver.sh env)"
  stop:       make down
MSG
