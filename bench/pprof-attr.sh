#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Attributes a kube-apiserver CPU profile (bench/run.sh with BENCH_PPROF) to what it
# serves: the share of samples under each category (a pprof focus: every sample with a
# matching frame). The categories overlap: the first rows split the work by storage
# operation, the later ones cut across them (a JSON decode inside an update counts in
# both).
#
#   bench/pprof-attr.sh PROFILE.pb.gz [PROFILE2.pb.gz]   one column per profile
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,7s/^# \{0,1\}//p' "$0" >&2; exit 2; }
CATS=(
	"updates and patches (storage GuaranteedUpdate: decode, admission, validation, managedFields, etcd txn)|storage/etcd3.\\(\\*store\\).GuaranteedUpdate"
	"creates (storage Create)|storage/etcd3.\\(\\*store\\).Create"
	"deletes (storage Delete)|storage/etcd3.\\(\\*store\\).(Delete|conditionalDelete)"
	"gets and lists from storage|storage/etcd3.\\(\\*store\\).(Get|GetList)|cacher.\\(\\*CacheDelegator\\).(Get|GetList)"
	"watch: events from etcd (decode)|storage/etcd3.\\(\\*watchChan\\)"
	"watch: fan-out to watchers (encode, send)|cacher.\\(\\*cachingObject\\)|cacher.\\(\\*cacheWatcher\\)|cacher.\\(\\*Cacher\\).dispatch|handlers.serveWatch|WatchServer"
	"custom resources (crdHandler: Sandboxes, claims, pools, templates)|apiextensions-apiserver/pkg/apiserver.\\(\\*crdHandler\\)"
	"CRD schema validation|apiextensions-apiserver/pkg/apiserver/validation|kube-openapi/pkg/validation|apiextensions-apiserver/pkg/apiserver/schema"
	"managedFields (structured-merge-diff)|structured-merge-diff|fieldmanager"
	"JSON encode and decode|encoding/json|json-iterator|sigs.k8s.io/json|serializer/json|jsoniter"
	"protobuf encode and decode|serializer/protobuf|gogo/protobuf|google.golang.org/protobuf"
	"admission|k8s.io/apiserver/pkg/admission"
	"authentication and authorization|AuthenticateRequest|Authorizer\\).Authorize|rbac"
	"TLS and HTTP/2|crypto/tls|crypto/aes|golang.org/x/net/http2"
	"Go garbage collection|runtime.gcBgMarkWorker|runtime.gcDrain|runtime.scanobject|runtime.markroot"
	"/metrics|prometheus|legacyregistry"
)
total() { go tool pprof -top -nodecount=1 "$1" 2>/dev/null | sed -n 's/.* of \([0-9.]*m\{0,1\}s\) total.*/\1/p' | head -1; }
printf '| where (pprof focus) |'
for p in "$@"; do # column: <leg dir>/<scenario> (bench/upstream.sh compare --profile)
	printf ' %s/%s (%s) |' "$(basename "$(dirname "$p")")" "$(basename "$p" .pb.gz)" "$(total "$p")"
done
printf '\n|---|'
for _ in "$@"; do printf -- '---:|'; done
printf '\n'
for c in "${CATS[@]}"; do
	name=${c%%|*} re=${c#*|}
	printf '| %s |' "$name"
	for p in "$@"; do
		v=$(go tool pprof -top -nodecount=1000000 -nodefraction=0 -edgefraction=0 -focus="$re" "$p" 2>/dev/null |
			sed -n 's/^Showing nodes accounting for .*, \([0-9.]*\)% of .* total.*/\1/p' | head -1)
		printf ' %s %% |' "${v:-0}"
	done
	printf '\n'
done
