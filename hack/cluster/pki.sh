# Certificates and kubeconfigs of the local cluster (openssl). Source it after lib.sh.
# shellcheck shell=bash
# One CA signs everything; keys are ECDSA P-256 except the RSA service-account key.
# Existing files are kept, so `up` reuses them.

pki_ca() {
	[ -s "$PKI/ca.crt" ] && return 0
	mkdir -p "$PKI"
	chmod 700 "$PKI"
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 3650 -subj "/CN=agent-sandbox-local-ca" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		2>/dev/null || die "openssl: cannot create the CA"
}

# pki_cert NAME SUBJECT EXT_KEY_USAGE [SAN]: NAME.crt/NAME.key signed by the CA.
pki_cert() {
	local name=$1 subj=$2 eku=$3 san=${4:-} ext
	[ -s "$PKI/$name.crt" ] && return 0
	ext=$(mktemp)
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		[ -z "$san" ] || echo "subjectAltName=$san"
	} >"$ext"
	openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$PKI/$name.key" -subj "$subj" 2>/dev/null |
		openssl x509 -req -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -set_serial "0x$(openssl rand -hex 16)" \
			-days 3650 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
	local rc=$?
	rm -f "$ext"
	[ $rc -eq 0 ] || { rm -f "$PKI/$name.crt"; die "openssl: cannot create certificate $name"; }
}

# pki_kubeconfig FILE CERT_NAME: kubeconfig with embedded CA and client certificate
# (rewritten only when its content changes).
pki_kubeconfig() {
	local file=$1 name=$2
	cat >"$file.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: agent-sandbox-local
  cluster:
    server: $API_SERVER
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$name.crt")
    client-key-data: $(base64 -w0 "$PKI/$name.key")
contexts:
- name: agent-sandbox-local
  context:
    cluster: agent-sandbox-local
    user: $name
current-context: agent-sandbox-local
KC
	chmod 600 "$file.tmp"
	if cmp -s "$file.tmp" "$file"; then rm -f "$file.tmp"; else mv "$file.tmp" "$file"; fi
}

pki_all() {
	need openssl "apt-get install openssl"
	pki_ca
	local api_san="IP:$BRIDGE_IP,IP:127.0.0.1,IP:$SVC_IP,DNS:localhost,DNS:kubernetes"
	api_san+=",DNS:kubernetes.default,DNS:kubernetes.default.svc"
	api_san+=",DNS:kubernetes.default.svc.$CLUSTER_DOMAIN"
	pki_cert apiserver "/CN=kube-apiserver" serverAuth "$api_san"
	pki_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
	pki_cert admin "/O=system:masters/CN=agent-sandbox-admin" clientAuth
	pki_cert controller-manager "/CN=system:kube-controller-manager" clientAuth
	pki_cert scheduler "/CN=system:kube-scheduler" clientAuth
	pki_cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
	pki_cert kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:$BRIDGE_IP,DNS:$NODE_NAME"
	pki_cert kube-proxy "/CN=system:kube-proxy" clientAuth
	pki_cert kwok "/O=system:masters/CN=agent-sandbox-kwok" clientAuth
	if [ ! -s "$PKI/sa.pub" ]; then
		openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null &&
			openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null ||
			die "openssl: cannot create the service-account key"
	fi
	mkdir -p "$CONF"
	pki_kubeconfig "$KUBECONFIG_PATH" admin
	local c
	for c in controller-manager scheduler kubelet kube-proxy kwok; do
		pki_kubeconfig "$CONF/$c.kubeconfig" "$c"
	done
}
