# Host network of the local cluster: bridge, CNI config, our iptables chains. Source it.
# shellcheck shell=bash
#
# Network rule: nothing leaves the machine. Pod traffic is bridged on $BRIDGE only;
# our chains drop anything forwarded between the bridge and another interface, any
# packet for our ranges that arrives on another interface, and host traffic to
# service or kwok addresses that kube-proxy did not translate (it would otherwise
# follow the default route). The CNI bridge plugin runs with ipMasq false.
# Rules live in dedicated chains (AS-CLUSTER-*) so that cleanup is exact.
#
# Guard routes: "unreachable" routes for our ranges, so that a client holding a stale
# kubeconfig (cluster down) fails at once instead of sending packets for 10.244.0.1
# along the default route. The bridge's /24 is more specific than the pod guard, so
# the guards for pods and kwok stay while the cluster runs; the service guard is
# only present while it is down (a route lookup happens before kube-proxy's DNAT).
# `down` keeps the guards; `down --purge` removes them.
POD_GUARD=${POD_CIDR%.*.*}.0.0/16

# Chains: table:parent-chain:our-chain
NET_CHAINS=(raw:PREROUTING:AS-CLUSTER-PRE mangle:FORWARD:AS-CLUSTER-FWD
	filter:FORWARD:AS-CLUSTER-FWD filter:OUTPUT:AS-CLUSTER-OUT)

net_chain_rules() { # net_chain_rules TABLE CHAIN: the rules of one of our chains
	case $1:$2 in
	raw:AS-CLUSTER-PRE)
		echo "-i lo -j RETURN"
		echo "-i $BRIDGE -j RETURN"
		echo "-d $POD_CIDR -j DROP"
		echo "-d $SVC_CIDR -j DROP"
		echo "-d $KWOK_CIDR -j DROP"
		;;
	mangle:AS-CLUSTER-FWD)
		echo "-i $BRIDGE -o $BRIDGE -j RETURN"
		echo "-i $BRIDGE -j DROP"
		echo "-o $BRIDGE -j DROP"
		;;
	filter:AS-CLUSTER-FWD)
		echo "-i $BRIDGE -o $BRIDGE -j ACCEPT"
		;;
	filter:AS-CLUSTER-OUT)
		echo "-d $SVC_CIDR -j REJECT"
		echo "-d $KWOK_CIDR -j REJECT"
		;;
	esac
}

net_iptables_up() {
	local spec t parent chain rule
	for spec in "${NET_CHAINS[@]}"; do
		IFS=: read -r t parent chain <<<"$spec"
		iptables -w -t "$t" -N "$chain" 2>/dev/null || iptables -w -t "$t" -F "$chain"
		while read -r rule; do
			# shellcheck disable=SC2086
			iptables -w -t "$t" -A "$chain" $rule || die "iptables: cannot add '$rule' to $t/$chain"
		done < <(net_chain_rules "$t" "$chain")
		iptables -w -t "$t" -C "$parent" -j "$chain" 2>/dev/null ||
			iptables -w -t "$t" -I "$parent" 1 -j "$chain" || die "iptables: cannot hook $t/$chain"
	done
}

net_iptables_down() {
	local spec t parent chain
	for spec in "${NET_CHAINS[@]}"; do
		IFS=: read -r t parent chain <<<"$spec"
		while iptables -w -t "$t" -D "$parent" -j "$chain" 2>/dev/null; do :; done
		iptables -w -t "$t" -F "$chain" 2>/dev/null || true
		iptables -w -t "$t" -X "$chain" 2>/dev/null || true
	done
}

net_cni_conf() {
	mkdir -p "$STATE/cni/net.d" "$STATE/cni/ipam"
	cat >"$STATE/cni/net.d/10-agent-sandbox.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "agent-sandbox",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$BRIDGE_IP"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
JSON
}

# net_guard up|down|purge
net_guard() {
	case $1 in
	up)
		ip route replace unreachable "$POD_GUARD" && ip route replace unreachable "$KWOK_CIDR" ||
			die "cannot add guard routes"
		ip route del unreachable "$SVC_CIDR" 2>/dev/null || true
		;;
	down) ip route replace unreachable "$SVC_CIDR" 2>/dev/null || true ;;
	purge)
		local r
		for r in "$POD_GUARD" "$KWOK_CIDR" "$SVC_CIDR"; do ip route del unreachable "$r" 2>/dev/null || true; done
		;;
	esac
}

net_up() {
	net_guard up
	if ! ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link add "$BRIDGE" type bridge || die "cannot create bridge $BRIDGE"
	fi
	ip addr show dev "$BRIDGE" | grep -q "inet $BRIDGE_IP/" ||
		ip addr add "$BRIDGE_IP/${POD_CIDR#*/}" dev "$BRIDGE" || die "cannot address $BRIDGE"
	ip link set "$BRIDGE" up
	modprobe br_netfilter 2>/dev/null || true
	[ "$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null)" = 1 ] ||
		sysctl -qw net.bridge.bridge-nf-call-iptables=1 ||
		die "net.bridge.bridge-nf-call-iptables is not available (modprobe br_netfilter)"
	# Pod -> service -> pod is routed on the bridge; the bridge plugin turns this on
	# anyway. The previous value is restored by `down`.
	[ -f "$STATE/ip_forward.orig" ] || cat /proc/sys/net/ipv4/ip_forward >"$STATE/ip_forward.orig"
	sysctl -qw net.ipv4.ip_forward=1
	net_iptables_up
	net_cni_conf
}

net_down() {
	net_guard down
	net_iptables_down
	ip link del "$BRIDGE" 2>/dev/null || true
	if [ -f "$STATE/ip_forward.orig" ]; then
		sysctl -qw "net.ipv4.ip_forward=$(cat "$STATE/ip_forward.orig")" || true
		rm -f "$STATE/ip_forward.orig"
	fi
	rm -rf "$STATE/cni/ipam"
}
