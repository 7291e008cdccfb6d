#!/usr/bin/env bash
# Run a command against a ready local cluster: brings it up if needed (idempotent),
# then runs CMD with KUBECONFIG (and AS_CLUSTER_KUBECONFIG) set to the admin kubeconfig.
#
#   hack/cluster/with-cluster.sh [--kwok-nodes N] [--] CMD [ARGS...]
#
# Example: hack/cluster/with-cluster.sh ctest --test-dir build/x -L cluster
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
up_args=()
while [ $# -gt 0 ]; do
	case $1 in
	--kwok-nodes) up_args+=(--kwok-nodes "${2:?--kwok-nodes needs a number}"); shift 2 ;;
	--) shift; break ;;
	*) break ;;
	esac
done
[ $# -gt 0 ] || { sed -n '2,8s/^# \{0,1\}//p' "$0" >&2; exit 2; }
"$here/cluster.sh" up "${up_args[@]}" >&2
KUBECONFIG=$("$here/cluster.sh" kubeconfig)
export KUBECONFIG AS_CLUSTER_KUBECONFIG=$KUBECONFIG
exec "$@"
