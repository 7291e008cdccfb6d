#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Waits until the four CRDs are Established.
#
#   hack/wait-crds.sh KUBECTL [ARGS...]      (ARGS: kubectl's, e.g. --kubeconfig FILE)
#
# `kubectl wait --for condition=established` fails at once, instead of waiting, on a CRD
# created a moment ago whose status.conditions is still null ("accessor error: <nil> is
# of the type <nil>, expected []interface{}"). That failure is retried every half second
# (AS_WAIT_CRDS_POLL) for up to 60 tries (AS_WAIT_CRDS_TRIES), 30 s; any other one
# (kubectl's own 60 s timeout included) is returned at once with kubectl's message.
# Exit 0 when all four are Established, 1 on a failure, 2 on bad usage.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 KUBECTL [ARGS...]" >&2; exit 2; }
tries=${AS_WAIT_CRDS_TRIES:-60} poll=${AS_WAIT_CRDS_POLL:-0.5}
[[ $tries =~ ^[1-9][0-9]*$ ]] || { echo "$0: AS_WAIT_CRDS_TRIES: '$tries' is not a positive whole number" >&2; exit 2; }
[[ $poll =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "$0: AS_WAIT_CRDS_POLL: '$poll' is not a number of seconds" >&2; exit 2; }
crds=(crd/sandboxes.agents.x-k8s.io crd/sandboxtemplates.extensions.agents.x-k8s.io
	crd/sandboxclaims.extensions.agents.x-k8s.io crd/sandboxwarmpools.extensions.agents.x-k8s.io)
err=""
for ((i = 1; i <= tries; i++)); do
	err=$("$@" wait --for condition=established --timeout=60s "${crds[@]}" 2>&1 >/dev/null) && exit 0
	case $err in
	*"accessor error"*) [ "$i" -lt "$tries" ] && sleep "$poll" ;;
	*) break ;;
	esac
done
printf '%s\n' "$err" >&2
exit 1
