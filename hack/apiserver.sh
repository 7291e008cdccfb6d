#!/usr/bin/env bash
# A real etcd + kube-apiserver (+ namespace/GC controllers) on 127.0.0.1 for tests.
#
#   hack/apiserver.sh start|stop|restart|status|kubeconfig|env|sweep
#
# start       start (or keep) etcd, kube-apiserver and, when its binary is built,
#             kube-controller-manager running only the namespace, garbage-collector and
#             PVC-protection controllers (the last lets a deleted PVC go once no Pod uses
#             it, as in a real cluster); wait for /readyz; print the kubeconfig path.
#             Idempotent.
# stop        stop all of them (the state dir is kept; `stop --purge` removes it).
# status      print what runs; exit 0 when the API server is ready, 3 otherwise.
# kubeconfig  print the admin kubeconfig path.
# env         print shell exports: eval "$(hack/apiserver.sh env)".
# sweep       delete what crashed integration tests left behind: namespaces labelled
#             agent-sandbox.test/integration=true, it-* flow-control and webhook
#             objects, the Widget test CRD.
#
# Everything lives in the state dir ($AS_APISERVER_DIR, default .cache/apiserver):
#   kubeconfig          admin (client certificate, group system:masters), inline PEM
#   kubeconfig-<user>   token kubeconfigs for the test users (see tokens.csv)
#   tokens.csv          static token file: token,user,uid,"groups"
#   pki/                CA, serving cert, admin cert, service-account key pair
#   ports.env           the ports in use; etcd-endpoint: etcd's client URL (plain HTTP)
#   *.log, *.pid        logs and pids
# Ports: chosen at the first start (free ports from AS_APISERVER_PORT=16443,
# AS_ETCD_PORT=12379 upwards; peer port = etcd port + 1) and reused afterwards.
# Env: AS_APISERVER_TIMEOUT (readiness wait, default 120 s), AS_APISERVER_CONTROLLERS
# (kube-controller-manager --controllers, default
# "namespace,garbagecollector,pvc-protection";
# "none" disables it), AS_APISERVER_EXTRA_ARGS (more kube-apiserver flags),
# AS_KCM_EXTRA_ARGS (more kube-controller-manager flags, e.g. its client rate
# "--kube-api-qps=200 --kube-api-burst=300"; a change restarts everything at the next start).
# PodTemplates have no watch cache (--watch-cache-sizes=podtemplates#0), so a watch on
# them goes to etcd and sees an etcd compaction at once: the 410 test relies on it.
source "$(dirname "$0")/lib.sh"

DIR=${AS_APISERVER_DIR:-$CACHE_DIR/apiserver}
PKI=$DIR/pki
KUBECONFIG_PATH=$DIR/kubeconfig
TIMEOUT=${AS_APISERVER_TIMEOUT:-120}
CONTROLLERS=${AS_APISERVER_CONTROLLERS:-namespace,garbagecollector,pvc-protection}
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
BIN=$CACHE_DIR/bin
COMPONENTS=(etcd kube-apiserver kube-controller-manager)

usage() { sed -n '2,15s/^# \{0,1\}//p' "$0" >&2; exit 2; }

# --- processes ----------------------------------------------------------------

pid_of() { # component -> pid on stdout when running and ours, else fails
	local f=$DIR/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	ours "$pid" || return 1
	echo "$pid"
}

ours() { # pid -> true when its command line names our state dir
	local cmd
	cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline") || return 1
	[[ $cmd == *"$DIR/"* ]]
}

leftovers() { # pids of processes started from this state dir, pid files or not
	local p
	for p in /proc/[0-9]*; do
		p=${p#/proc/}
		[ "$p" != $$ ] || continue
		case $(cat "/proc/$p/comm" 2>/dev/null) in
		etcd | kube-apiserver | kube-controller) ours "$p" && echo "$p" ;;
		esac
	done
}

kill_pid() { # pid: TERM, wait up to 10 s, then KILL
	local pid=$1
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

stop_all() {
	local c pid
	# Reverse order: controllers, API server, then etcd.
	for c in kube-controller-manager kube-apiserver etcd; do
		if pid=$(pid_of "$c"); then kill_pid "$pid"; fi
		rm -f "$DIR/$c.pid"
	done
	for pid in $(leftovers); do kill_pid "$pid"; done
}

# launched_alive component: the process launch() just started still exists. Not pid_of:
# until the forked shell has exec'd the binary, its command line does not name the state
# dir yet, and a busy machine showed that moment as "exited".
launched_alive() {
	local pid
	pid=$(cat "$DIR/$1.pid" 2>/dev/null) && [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null &&
		! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null
}

launch() { # component args... : start in its own session, log and pid in the state dir
	local c=$1
	shift
	# fd 9 is the start/stop lock: the daemons must not inherit it.
	setsid "$BIN/$c" "$@" </dev/null >>"$DIR/$c.log" 2>&1 9>&- &
	echo $! >"$DIR/$c.pid"
}

# --- ports --------------------------------------------------------------------

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() { # first port >= $1 such that $1 and ($1 + $2) are free
	local p=$1 span=${2:-0}
	while port_busy "$p" || { [ "$span" -gt 0 ] && port_busy $((p + span)); }; do
		p=$((p + 2))
		[ "$p" -lt 65000 ] || die "no free port found"
	done
	echo "$p"
}

choose_ports() {
	# Reuse the recorded ports when they are free (nothing of ours runs now).
	if [ -f "$DIR/ports.env" ]; then
		# shellcheck disable=SC1091
		source "$DIR/ports.env"
		if ! port_busy "$APISERVER_PORT" && ! port_busy "$ETCD_PORT" &&
			! port_busy "$ETCD_PEER_PORT"; then
			return
		fi
		log "recorded ports are taken by another process; choosing new ones"
	fi
	ETCD_PORT=$(free_port "${AS_ETCD_PORT:-12379}" 1)
	ETCD_PEER_PORT=$((ETCD_PORT + 1))
	APISERVER_PORT=$(free_port "${AS_APISERVER_PORT:-16443}")
	printf 'APISERVER_PORT=%s\nETCD_PORT=%s\nETCD_PEER_PORT=%s\n' \
		"$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" >"$DIR/ports.env"
}

# --- certificates, tokens, kubeconfigs ------------------------------------------

cert() { # name subject [ext-file]: key + cert signed by our CA
	local name=$1 subj=$2 ext=${3:-}
	openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
	openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
	openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
		-CAcreateserial -days 3650 -sha256 -out "$PKI/$name.crt" \
		${ext:+-extfile "$ext"} 2>/dev/null
	rm -f "$PKI/$name.csr"
}

make_pki() {
	[ -f "$PKI/.ready" ] && return
	need openssl "apt-get install openssl"
	rm -rf "$PKI"
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	log "generating certificates in $PKI"
	openssl genrsa -out "$PKI/ca.key" 2048 2>/dev/null
	openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=agent-sandbox-test-ca" \
		-days 3650 -sha256 -out "$PKI/ca.crt" 2>/dev/null
	cat >"$PKI/serving.ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
EOF
	printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >"$PKI/client.ext"
	cert apiserver "/CN=kube-apiserver" "$PKI/serving.ext"
	cert admin "/O=system:masters/CN=admin" "$PKI/client.ext"
	cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$PKI/client.ext"
	openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
	openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
	touch "$PKI/.ready"
}

# Static tokens: admin (system:masters) and unprivileged test users. as-throttled is
# the user that the 429 test routes into a tiny APF priority level.
make_tokens() {
	[ -f "$DIR/tokens.csv" ] && return
	local u
	: >"$DIR/tokens.csv.tmp"
	for u in admin:system:masters alice:as:testers bob:as:testers as-throttled:as:throttled; do
		printf '%s,%s,uid-%s,"%s"\n' "$(openssl rand -hex 16)" "${u%%:*}" "${u%%:*}" \
			"${u#*:}" >>"$DIR/tokens.csv.tmp"
	done
	chmod 600 "$DIR/tokens.csv.tmp"
	mv "$DIR/tokens.csv.tmp" "$DIR/tokens.csv"
}

b64() { base64 -w0 <"$1"; }

write_kubeconfig() { # path user-name user-block...
	local path=$1 user=$2
	shift 2
	cat >"$path.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agent-sandbox-test
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: $user
  user:
$(printf '    %s\n' "$@")
contexts:
- name: $user@agent-sandbox-test
  context:
    cluster: agent-sandbox-test
    user: $user
    namespace: default
current-context: $user@agent-sandbox-test
EOF
	chmod 600 "$path.tmp"
	mv "$path.tmp" "$path"
}

make_kubeconfigs() {
	local tok user
	write_kubeconfig "$KUBECONFIG_PATH" admin \
		"client-certificate-data: $(b64 "$PKI/admin.crt")" \
		"client-key-data: $(b64 "$PKI/admin.key")"
	while IFS=, read -r tok user _; do
		[ "$user" = admin ] && continue
		write_kubeconfig "$DIR/kubeconfig-$user" "$user" "token: $tok"
	done <"$DIR/tokens.csv"
	echo "http://127.0.0.1:$ETCD_PORT" >"$DIR/etcd-endpoint"
}

# --- start ----------------------------------------------------------------------

curl_admin() { # path: GET over TLS with the admin certificate
	curl -sS -A agent-sandbox-hack --max-time 5 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" \
		--key "$PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT$1" "${@:2}"
}

ready() {
	[ -f "$DIR/ports.env" ] && [ -f "$PKI/.ready" ] || return 1
	# shellcheck disable=SC1091
	source "$DIR/ports.env"
	[ "$(curl_admin /readyz 2>/dev/null)" = ok ]
}

fail_start() { # component message
	local c
	log "$2"
	for c in "${COMPONENTS[@]}"; do
		[ -f "$DIR/$c.log" ] || continue
		printf '\n--- last lines of %s ---\n' "$DIR/$c.log" >&2
		tail -n 25 "$DIR/$c.log" >&2
	done
	stop_all
	die "could not start $1 (logs in $DIR)"
}

start_etcd() {
	launch etcd --name=as-test --data-dir="$DIR/etcd" \
		--listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster="as-test=http://127.0.0.1:$ETCD_PEER_PORT" \
		--unsafe-no-fsync=true --log-level=warn
	for _ in $(seq 1 $((TIMEOUT * 5))); do
		curl -s --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null |
			grep -q '"health":"true"' && return 0
		launched_alive etcd || fail_start etcd "etcd exited"
		sleep 0.2
	done
	fail_start etcd "etcd not healthy after ${TIMEOUT}s"
}

apiserver_args() { # one flag per line
	printf '%s\n' \
		--etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 \
		--secure-port="$APISERVER_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" --token-auth-file="$DIR/tokens.csv" \
		--kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
		--authorization-mode=Node,RBAC \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$PKI/sa.pub" \
		--service-account-signing-key-file="$PKI/sa.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" \
		--enable-priority-and-fairness=true \
		--allow-privileged=true \
		--profiling=false \
		--watch-cache-sizes=podtemplates#0 \
		--v=1
	# shellcheck disable=SC2086 # word splitting of the extra flags is intended
	[ -z "${AS_APISERVER_EXTRA_ARGS:-}" ] || printf '%s\n' $AS_APISERVER_EXTRA_ARGS
}

start_apiserver() {
	local args
	mapfile -t args < <(apiserver_args)
	running_config >"$DIR/kube-apiserver.args"
	launch kube-apiserver "${args[@]}"
	for _ in $(seq 1 $((TIMEOUT * 2))); do
		ready && return 0
		launched_alive kube-apiserver || fail_start kube-apiserver "kube-apiserver exited"
		sleep 0.5
	done
	fail_start kube-apiserver "kube-apiserver not ready after ${TIMEOUT}s: $(curl_admin /readyz?verbose 2>&1 | grep -v ' ok$' | tail -n 5)"
}

kcm_args() { # one flag per line
	printf '%s\n' --kubeconfig="$KUBECONFIG_PATH" --controllers="$CONTROLLERS" \
		--leader-elect=false --secure-port=0 --use-service-account-credentials=false --v=1
	# shellcheck disable=SC2086 # word splitting of the extra flags is intended
	[ -z "${AS_KCM_EXTRA_ARGS:-}" ] || printf '%s\n' $AS_KCM_EXTRA_ARGS
}

start_controllers() {
	local -a args
	[ "$CONTROLLERS" != none ] && [ -x "$BIN/kube-controller-manager" ] || return 0
	mapfile -t args < <(kcm_args)
	launch kube-controller-manager "${args[@]}"
	sleep 0.3
	launched_alive kube-controller-manager ||
		fail_start kube-controller-manager "kube-controller-manager exited"
}

running_config() { # the flags and the binaries (a rebuild changes size and mtime)
	apiserver_args
	printf '# kube-controller-manager\n'
	kcm_args
	stat -L -c '# %n %s %Y' "$BIN/etcd" "$BIN/kube-apiserver"
}

running() { # true when everything we need runs, with today's flags and binaries
	pid_of etcd >/dev/null && pid_of kube-apiserver >/dev/null && ready || return 1
	[ "$(running_config)" = "$(cat "$DIR/kube-apiserver.args" 2>/dev/null)" ] || return 1
	if [ "$CONTROLLERS" != none ] && [ -x "$BIN/kube-controller-manager" ]; then
		pid_of kube-controller-manager >/dev/null || return 1
	fi
}

cmd_start() {
	local c
	for c in etcd kube-apiserver; do
		[ -x "$BIN/$c" ] || die "$BIN/$c missing: run hack/build-k8s.sh etcd kube-apiserver"
	done
	need curl "apt-get install curl"
	mkdir -p "$DIR"
	exec 9>"$DIR/.lock"
	flock -w "$((TIMEOUT + 60))" 9 || die "another start/stop holds $DIR/.lock"
	if running; then
		log "already running: https://127.0.0.1:$APISERVER_PORT"
		echo "$KUBECONFIG_PATH"
		return 0
	fi
	stop_all # stale pid files, or a partial set left by a killed run
	make_pki
	make_tokens
	choose_ports
	make_kubeconfigs
	log "starting etcd on 127.0.0.1:$ETCD_PORT"
	start_etcd
	log "starting kube-apiserver on 127.0.0.1:$APISERVER_PORT"
	start_apiserver
	start_controllers
	log "ready: https://127.0.0.1:$APISERVER_PORT (kubeconfig $KUBECONFIG_PATH)"
	echo "$KUBECONFIG_PATH"
}

cmd_stop() {
	[ -d "$DIR" ] || return 0
	exec 9>"$DIR/.lock"
	flock -w 60 9 || die "another start/stop holds $DIR/.lock"
	stop_all
	if [ "${1:-}" = --purge ]; then
		rm -rf "$DIR"
		log "stopped; removed $DIR"
	else
		log "stopped"
	fi
}

cmd_status() {
	local c pid rc=0
	for c in "${COMPONENTS[@]}"; do
		if pid=$(pid_of "$c"); then
			printf '%-24s running (pid %s)\n' "$c" "$pid"
		else
			printf '%-24s stopped\n' "$c"
		fi
	done
	if ready; then
		printf '%-24s https://127.0.0.1:%s ready\n' endpoint "$APISERVER_PORT"
		printf '%-24s %s\n' kubeconfig "$KUBECONFIG_PATH"
		printf '%-24s http://127.0.0.1:%s\n' etcd "$ETCD_PORT"
	else
		printf '%-24s not ready\n' endpoint
		rc=3
	fi
	return $rc
}

api_names() { # path: names of the listed objects (compact JSON: curl as UA gets it indented)
	curl_admin "$1" | grep -o '"metadata":{"name":"[^"]*"' | sed 's/.*"name":"\([^"]*\)"/\1/'
}

api_delete() { # path
	curl -sS -o /dev/null --max-time 10 -X DELETE --cacert "$PKI/ca.crt" \
		--cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$APISERVER_PORT$1"
}

cmd_sweep() {
	ready || die "the API server is not running"
	local n p
	for n in $(api_names "/api/v1/namespaces?labelSelector=agent-sandbox.test%2Fintegration%3Dtrue"); do
		log "deleting namespace $n"
		api_delete "/api/v1/namespaces/$n"
	done
	for p in /apis/flowcontrol.apiserver.k8s.io/v1/flowschemas \
		/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations \
		/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations; do
		for n in $(api_names "$p" | grep '^it-'); do
			log "deleting ${p##*/}/$n"
			api_delete "$p/$n"
		done
	done
	p=/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.testing.agents.x-k8s.io
	if [ "$(curl_admin "$p" -o /dev/null -w '%{http_code}' 2>/dev/null)" = 200 ]; then
		log "deleting the Widget test CRD"
		api_delete "$p"
	fi
}

cmd_env() {
	printf 'export AS_APISERVER_DIR=%q\n' "$DIR"
	printf 'export AS_KUBECONFIG=%q\n' "$KUBECONFIG_PATH"
	printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_PATH"
	if [ -f "$DIR/etcd-endpoint" ]; then
		printf 'export AS_ETCD_ENDPOINT=%q\n' "$(cat "$DIR/etcd-endpoint")"
	fi
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop "${2:-}" ;;
restart) cmd_stop && cmd_start ;;
status) cmd_status ;;
kubeconfig) echo "$KUBECONFIG_PATH" ;;
env) cmd_env ;;
sweep) cmd_sweep ;;
*) usage ;;
esac
