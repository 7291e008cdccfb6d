#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ctest "hack_wait_crds": hack/wait-crds.sh against a fake kubectl that refuses with the
# "accessor error" of a CRD whose conditions are still null a given number of times, then
# answers as told. It checks the retries, the give-up after AS_WAIT_CRDS_TRIES, that any
# other failure returns at once with kubectl's message, the arguments kubectl is given,
# and bad settings.
# Usage: test_wait_crds.sh SOURCE_DIR
set -u
script=$1/hack/wait-crds.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

# The fake: FAKE_REFUSE refusals, then FAKE_THEN (ok | timeout); every call's arguments
# are appended to $work/calls.
cat >"$work/kubectl" <<'FAKE'
#!/usr/bin/env bash
echo "$*" >>"$FAKE_DIR/calls"
n=$(wc -l <"$FAKE_DIR/calls")
if [ "$n" -le "${FAKE_REFUSE:-0}" ]; then
	echo 'error: .status.conditions accessor error: <nil> is of the type <nil>, expected []interface{}' >&2
	exit 1
fi
case ${FAKE_THEN:-ok} in
ok) echo "customresourcedefinition.apiextensions.k8s.io/x condition met"; exit 0 ;;
*) echo 'error: timed out waiting for the condition on customresourcedefinitions/sandboxes.agents.x-k8s.io' >&2; exit 1 ;;
esac
FAKE
chmod +x "$work/kubectl"

# run DESCRIPTION WANT-STATUS WANT-CALLS WANT-STDERR-REGEX [VAR=VALUE...]
run() {
	local d=$1 want_rc=$2 want_calls=$3 want=$4 rc calls err
	shift 4
	rm -f "$work/calls"
	touch "$work/calls"
	err=$(env FAKE_DIR="$work" AS_WAIT_CRDS_POLL=0.01 "$@" \
		bash "$script" "$work/kubectl" --kubeconfig /k/config 2>&1 >/dev/null)
	rc=$?
	calls=$(wc -l <"$work/calls")
	if [ "$rc" = "$want_rc" ] && [ "$calls" = "$want_calls" ] &&
		printf '%s\n' "$err" | grep -Eq "$want"; then
		echo "ok $d: status $rc after $calls calls"
	else
		echo "not ok $d: status $rc (want $want_rc), $calls calls (want $want_calls), stderr '$err' (want /$want/)"
		fail=1
	fi
}

run "established at once" 0 1 '^$'
run "two refusals, then established" 0 3 '^$' FAKE_REFUSE=2
run "refused to the last try" 1 5 'accessor error' FAKE_REFUSE=99 AS_WAIT_CRDS_TRIES=5
run "established on the last try" 0 5 '^$' FAKE_REFUSE=4 AS_WAIT_CRDS_TRIES=5
run "another failure returns at once" 1 1 '^error: timed out waiting' FAKE_THEN=timeout
run "another failure after a refusal" 1 2 '^error: timed out waiting' FAKE_REFUSE=1 FAKE_THEN=timeout
run "a bad try count" 2 0 "AS_WAIT_CRDS_TRIES: 'many' is not" AS_WAIT_CRDS_TRIES=many
run "a zero try count" 2 0 "AS_WAIT_CRDS_TRIES: '0' is not" AS_WAIT_CRDS_TRIES=0
run "a bad poll" 2 0 "AS_WAIT_CRDS_POLL: 'soon' is not" AS_WAIT_CRDS_POLL=soon

# kubectl is given the caller's arguments, then the wait for all four CRDs.
rm -f "$work/calls"
touch "$work/calls"
FAKE_DIR="$work" bash "$script" "$work/kubectl" --kubeconfig /k/config >/dev/null 2>&1
want='--kubeconfig /k/config wait --for condition=established --timeout=60s crd/sandboxes.agents.x-k8s.io crd/sandboxtemplates.extensions.agents.x-k8s.io crd/sandboxclaims.extensions.agents.x-k8s.io crd/sandboxwarmpools.extensions.agents.x-k8s.io'
if [ "$(cat "$work/calls")" = "$want" ]; then
	echo "ok the arguments"
else
	echo "not ok the arguments: '$(cat "$work/calls")' (want '$want')"
	fail=1
fi

# No kubectl at all: the usage.
if bash "$script" >/dev/null 2>&1; then
	echo "not ok no arguments: accepted"
	fail=1
else
	echo "ok no arguments: refused"
fi
exit "$fail"
