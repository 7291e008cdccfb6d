#!/usr/bin/env bash
# End-to-end test of opt-in page merging (spec.pageMerging of a SandboxTemplate) on the
# stack of `make up`: the node runs KSM; a Sandbox of a template with pageMerging:
# Enabled gets SANDBOXD_MEMORY_MERGE=1, its sandboxd and every process it starts are
# marked mergeable (the kernel's /proc/PID/ksm_stat), ksmd scans that memory, and the
# processes still run as the sandbox user without capabilities; Maximal also starts them
# without address randomization; a Sandbox of a template without it is not marked. Prints "ksm: N passed, N failed"; exits non-zero on failure.
set -uo pipefail
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
stack_kubeconfig || exit 1
stack_router || exit 1
NS=default
KSM=/sys/kernel/mm/ksm

# template NAME PAGE-MERGING: a SandboxTemplate running sandboxd from the runtime image (a warm pool
# of one serves each claim)
template() {
	k apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata: {name: $1, namespace: $NS}
spec:
  pageMerging: $2
$(runtime_pod_template)
$EMPTYDIR_VOLUME
YAML
}
pool() { # NAME TEMPLATE: a warm pool of one
	k apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: $1, namespace: $NS}
spec: {replicas: 1, sandboxTemplateRef: {name: $2}}
YAML
}
claim() { # NAME POOL
	k apply -f - >/dev/null <<YAML
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: $1, namespace: $NS}
spec: {warmPoolRef: {name: $2}}
YAML
}
cleanup() {
	local all="e2e-ksm-on e2e-ksm-off e2e-ksm-max"
	# shellcheck disable=SC2086 # the names are words
	{
		k -n "$NS" delete sandboxclaim $all --ignore-not-found --wait=false
		k -n "$NS" delete sandboxwarmpool $all --ignore-not-found --wait=false
		k -n "$NS" delete sandboxtemplate $all --ignore-not-found --wait=false
	} >/dev/null 2>&1
}
trap cleanup EXIT

if [ ! -r "$KSM/run" ] || ! grep -q . /proc/self/ksm_stat 2>/dev/null; then
	skip "page merging" "this kernel has no KSM or no /proc/PID/ksm_stat"
	summary ksm
	exit
fi
check "the node runs KSM (run = 1)" test "$(cat "$KSM/run")" = 1

template e2e-ksm-on Enabled
template e2e-ksm-off Disabled
template e2e-ksm-max Maximal
pool e2e-ksm-on e2e-ksm-on
pool e2e-ksm-off e2e-ksm-off
pool e2e-ksm-max e2e-ksm-max
claim e2e-ksm-on e2e-ksm-on
claim e2e-ksm-off e2e-ksm-off
claim e2e-ksm-max e2e-ksm-max
check "a claim of the pageMerging template becomes Ready" poll 120 is_ready sandboxclaim/e2e-ksm-on
check "a claim of the plain template becomes Ready" poll 120 is_ready sandboxclaim/e2e-ksm-off
check "a claim of the Maximal template becomes Ready" poll 120 is_ready sandboxclaim/e2e-ksm-max
on=$(claim_sandbox e2e-ksm-on)
off=$(claim_sandbox e2e-ksm-off)
max=$(claim_sandbox e2e-ksm-max)
env_of() { k -n "$NS" get sandbox "$1" -o jsonpath='{.spec.podTemplate.spec.containers[0].env[?(@.name=="SANDBOXD_MEMORY_MERGE")].value}'; }
check "the controller set SANDBOXD_MEMORY_MERGE=1 on the container" test "$(env_of "$on")" = 1
check "no SANDBOXD_MEMORY_MERGE without pageMerging" test -z "$(env_of "$off")"

# What a command in the sandbox sees: its own and sandboxd's (pid 1) merge mark, uid and
# effective capabilities.
probe='
import os, re
def merge(p):
    s = open(f"/proc/{p}/ksm_stat").read()
    return re.search(r"ksm_merge_any: (\w+)", s).group(1)
def capeff(p):
    return re.search(r"CapEff:\s*(\w+)", open(f"/proc/{p}/status").read()).group(1)
print(merge("self"), merge(1), os.getuid(), capeff("self"), capeff(1),
      open("/proc/self/personality").read().strip())'
read -r m_self m_d uid cap_self cap_d pers <<<"$(router_py "$on" "$probe")"
check "a command started by sandboxd is mergeable" test "${m_self:-}" = yes
check "sandboxd itself is mergeable" test "${m_d:-}" = yes
check "the command runs as the sandbox user (1000)" test "${uid:-}" = 1000
check "the command holds no capability" test "${cap_self:-}" = 0000000000000000
check "sandboxd holds no capability" test "${cap_d:-}" = 0000000000000000
check "Enabled keeps address randomization" test "${pers:-}" = 00000000
read -r m_self m_d uid cap_self _ pers <<<"$(router_py "$max" "$probe")"
check "Maximal: commands are mergeable, as the sandbox user" test "${m_self:-}/${m_d:-}/${uid:-}" = yes/yes/1000
check "Maximal: commands start without address randomization (ADDR_NO_RANDOMIZE)" \
	test "${pers:-}" = 00040000
check "Maximal: still no capability" test "${cap_self:-}" = 0000000000000000
read -r m_self m_d _ <<<"$(router_py "$off" "$probe")"
check "without pageMerging nothing is mergeable" test "${m_self:-}/${m_d:-}" = no/no

# ksmd scans the marked memory (rmap items appear once a scan reaches it); the advisor
# finishes a full scan within $AS_KSM_SCAN_TIME seconds (hack/cluster/ksm.sh).
scanned() {
	[ "$(router_py "$on" 'import re; print(re.search(r"ksm_rmap_items (\d+)", open("/proc/1/ksm_stat").read()).group(1))')" -gt 0 ]
}
check "ksmd scans the sandbox's memory" poll 90 scanned
summary ksm
