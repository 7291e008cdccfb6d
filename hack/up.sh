#!/usr/bin/env bash
# make up: build, start the local API server and print how to reach it.
# (The full local cluster in hack/cluster/ will take over here.)
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit
cmake --preset release >/dev/null
cmake --build --preset release
kubeconfig=$(hack/apiserver.sh start)
kubectl=$CACHE_DIR/bin/kubectl
[ -x "$kubectl" ] || kubectl="kubectl  # (hack/build-k8s.sh kubectl builds one into .cache/bin)"
cat <<MSG

The local API server is up.
  kubeconfig: $kubeconfig
  try:        KUBECONFIG=$kubeconfig $kubectl get namespaces
  shell:      eval "\$(hack/apiserver.sh env)"
  stop:       make down
MSG
