# Configuration and start of each process of the local cluster. Source it after lib.sh.
# shellcheck shell=bash
# start_<component> writes the component's config and starts it if not running;
# ready_<component> succeeds once it serves.

PAUSE_REF=localhost/agent-sandbox/pause:3.10

start_containerd() {
	mkdir -p "$STATE/containerd" "$RUN/containerd" "$RUN/runc" "$CONF"
	cat >"$CONF/containerd.toml" <<TOML
version = 2
root = "$STATE/containerd/root"
state = "$RUN/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "$CONTAINERD_SOCK"

[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[debug]
  level = "warn"

[plugins."io.containerd.internal.v1.opt"]
  path = "$STATE/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_REF"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  tolerate_missing_hugetlb_controller = true
  # Without CAP_SYS_RESOURCE (some VMs) runc cannot lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  disable_apparmor = true
  max_container_log_line_size = 65536

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        Root = "$RUN/runc"
        SystemdCgroup = false

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$STATE/cni/net.d"
    max_conf_num = 1
TOML
	pid_of containerd >/dev/null && return 0
	# Any image pull goes to a closed local port: nothing is fetched from a registry.
	HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY='' \
		http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9 no_proxy='' \
		start_daemon containerd containerd --config "$CONF/containerd.toml"
}
ready_containerd() { ctr --address "$CONTAINERD_SOCK" version; }

start_etcd() {
	pid_of etcd >/dev/null && return 0
	mkdir -p "$STATE/etcd"
	chmod 700 "$STATE/etcd"
	# --unsafe-no-fsync: the cluster is disposable; fsync would dominate write latency.
	start_daemon etcd "$BIN/etcd" --name as-etcd --data-dir "$STATE/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "as-etcd=http://127.0.0.1:$ETCD_PEER_PORT" \
		--unsafe-no-fsync --quota-backend-bytes 8589934592 --log-level warn
}
ready_etcd() { http_ok "http://127.0.0.1:$ETCD_PORT/health"; }

start_kube-apiserver() {
	pid_of kube-apiserver >/dev/null && return 0
	start_daemon kube-apiserver "$BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address "$BRIDGE_IP" --advertise-address "$BRIDGE_IP" --secure-port "$API_PORT" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" \
		--kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" \
		--kubelet-preferred-address-types InternalIP,Hostname \
		--service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
		--service-account-key-file "$PKI/sa.pub" \
		--service-account-signing-key-file "$PKI/sa.key" \
		--service-cluster-ip-range "$SVC_CIDR" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--allow-privileged=true --max-requests-inflight 800 --max-mutating-requests-inflight 400 \
		--profiling=false
}
ready_kube-apiserver() { api_ok /readyz; }

# AS_KCM_EXTRA_ARGS: extra kube-controller-manager flags, split into words and appended
# to its command line (e.g. "--node-monitor-grace-period=20s"). The args of the running
# one are recorded in $STATE/kcm-extra-args: an `up` without the variable keeps them,
# one with other args (AS_KCM_EXTRA_ARGS= for none) restarts only the controller manager.
kcm_extra_args() { # the wanted extra args
	if [ -n "${AS_KCM_EXTRA_ARGS+set}" ]; then
		printf '%s\n' "$AS_KCM_EXTRA_ARGS"
	else
		cat "$STATE/kcm-extra-args" 2>/dev/null || true
	fi
}
kcm_args_changed() { # the controller manager runs, with other extra args than wanted
	pid_of kube-controller-manager >/dev/null || return 1
	[ "$(kcm_extra_args)" != "$(cat "$STATE/kcm-extra-args" 2>/dev/null)" ]
}

start_kube-controller-manager() {
	local extra
	extra=$(kcm_extra_args)
	if pid_of kube-controller-manager >/dev/null; then
		kcm_args_changed || return 0
		log "kube-controller-manager: extra args '$(cat "$STATE/kcm-extra-args" 2>/dev/null)' -> '$extra': restarting it"
		stop_daemon kube-controller-manager
	fi
	printf '%s\n' "$extra" >"$STATE/kcm-extra-args"
	local kc=$CONF/controller-manager.kubeconfig
	# shellcheck disable=SC2086 # $extra: split into words on purpose
	start_daemon kube-controller-manager "$BIN/kube-controller-manager" \
		--kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
		--controllers '*,-node-ipam-controller,-cloud-node-lifecycle-controller,-service-lb-controller,-node-route-controller' \
		--root-ca-file "$PKI/ca.crt" --service-account-private-key-file "$PKI/sa.key" \
		--use-service-account-credentials=true --service-cluster-ip-range "$SVC_CIDR" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--kube-api-qps 200 --kube-api-burst 400 --concurrent-gc-syncs 40 --profiling=false \
		$extra
}
ready_kube-controller-manager() { http_ok -k "https://127.0.0.1:$KCM_PORT/healthz"; }

start_kube-scheduler() {
	cat >"$CONF/scheduler.yaml" <<YAML
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: $CONF/scheduler.kubeconfig
  qps: 200
  burst: 400
leaderElection:
  leaderElect: false
YAML
	pid_of kube-scheduler >/dev/null && return 0
	local kc=$CONF/scheduler.kubeconfig
	start_daemon kube-scheduler "$BIN/kube-scheduler" --config "$CONF/scheduler.yaml" \
		--authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --profiling=false
}
ready_kube-scheduler() { http_ok -k "https://127.0.0.1:$SCHED_PORT/healthz"; }

# cgroup_root_up: our kubelet's cgroup root (/as-cluster) in every v1 hierarchy.
cgroup_root_up() {
	local d
	for d in /sys/fs/cgroup/*/; do
		d=${d%/}
		[ -f "$d/cgroup.procs" ] || continue
		mkdir -p "$d/$CGROUP_ROOT"
		if [ -f "$d/cpuset.cpus" ]; then
			[ -n "$(cat "$d/$CGROUP_ROOT/cpuset.cpus")" ] || cat "$d/cpuset.cpus" >"$d/$CGROUP_ROOT/cpuset.cpus"
			[ -n "$(cat "$d/$CGROUP_ROOT/cpuset.mems")" ] || cat "$d/cpuset.mems" >"$d/$CGROUP_ROOT/cpuset.mems"
		fi
	done
}

start_kubelet() {
	mkdir -p "$STATE/kubelet" "$STATE/pod-logs"
	printf '# Local cluster: no nameservers (nothing resolves outside the cluster).\noptions ndots:1\n' \
		>"$CONF/resolv.conf"
	cat >"$CONF/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $BRIDGE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet-serving.crt
tlsPrivateKeyFile: $PKI/kubelet-serving.key
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_ROOT
failSwapOn: false
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
resolvConf: $CONF/resolv.conf
clusterDomain: $CLUSTER_DOMAIN
podLogsDir: $STATE/pod-logs
maxPods: 200
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
syncFrequency: 10s
YAML
	pid_of kubelet >/dev/null && return 0
	cgroup_root_up
	start_daemon kubelet "$BIN/kubelet" --config "$CONF/kubelet.yaml" \
		--kubeconfig "$CONF/kubelet.kubeconfig" --root-dir "$STATE/kubelet" \
		--cert-dir "$STATE/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$BRIDGE_IP" \
		--node-labels agent-sandbox.dev/node=real
}
ready_kubelet() { http_ok "http://127.0.0.1:$KUBELET_HEALTHZ_PORT/healthz"; }

start_kube-proxy() {
	cat >"$CONF/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $CONF/kube-proxy.kubeconfig
mode: iptables
oomScoreAdj: 0
clusterCIDR: $POD_CIDR
hostnameOverride: $NODE_NAME
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
nodePortAddresses: ["$BRIDGE_IP/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
YAML
	pid_of kube-proxy >/dev/null && return 0
	start_daemon kube-proxy "$BIN/kube-proxy" --config "$CONF/kube-proxy.yaml"
}
ready_kube-proxy() { http_ok "http://127.0.0.1:$PROXY_HEALTHZ_PORT/healthz"; }
