#!/usr/bin/env bash
# Create the cluster CA, component certificates, service-account key pair and kubeconfigs with openssl.
# Output: $RUN_DIR/pki/*, $RUN_DIR/kubeconfig (admin) and $RUN_DIR/*.kubeconfig. Idempotent.
#   pki.sh                 the control plane's and the single node's (NODE_NAME, NODE_IP)
#   pki.sh node NAME IP    one node of the multi-node cluster: its kubelet's serving certificate and its
#                          kubeconfig (system:node:NAME, as NodeRestriction wants) in $RUN_DIR/nodes/NAME
. "$(dirname "$0")/lib.sh"
NODE_NAME="${NODE_NAME:-rl-node}"
PKI="$RUN_DIR/pki"
mkdir -p "$PKI"; chmod 700 "$PKI"
DAYS=3650
# ECDSA P-256 keys: as good as RSA here and ~50x faster to generate.
genkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() {
  [[ -s "$PKI/ca.crt" ]] && return 0
  genkey "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -days "$DAYS" -subj "/CN=ringleader-test-ca" -out "$PKI/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature"
}

# cert NAME SUBJECT EXTKEYUSAGE [SAN]
cert() {
  local name="$1" subj="$2" eku="$3" san="${4:-}"
  [[ -s "$PKI/$name.crt" ]] && return 0
  genkey "$PKI/$name.key"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    [[ -n "$san" ]] && echo "subjectAltName=$san"
  } > "$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days "$DAYS" -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

# kubeconfig FILE CERTNAME USER
kubeconfig() {
  local file="$1" name="$2" user="$3"
  [[ -s "$file" ]] && return 0
  local ca_b64 crt_b64 key_b64
  ca_b64="$(base64 -w0 < "$PKI/ca.crt")"; crt_b64="$(base64 -w0 < "$PKI/$name.crt")"; key_b64="$(base64 -w0 < "$PKI/$name.key")"
  cat > "$file.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: ringleader
  cluster:
    server: https://$APISERVER_IP:$APISERVER_PORT
    certificate-authority-data: $ca_b64
users:
- name: $user
  user:
    client-certificate-data: $crt_b64
    client-key-data: $key_b64
contexts:
- name: ringleader
  context: {cluster: ringleader, user: $user}
current-context: ringleader
KC
  chmod 600 "$file.tmp"; mv "$file.tmp" "$file"
}

if [[ "${1:-}" == node ]]; then
  name="$2" ip="$3"
  mkdir -p "$RUN_DIR/nodes/$name"
  cert "kubelet-client-$name" "/O=system:nodes/CN=system:node:$name" clientAuth
  cert "kubelet-$name" "/CN=$name" serverAuth "DNS:$name,IP:$ip,IP:127.0.0.1"
  chmod 600 "$PKI"/*.key
  kubeconfig "$RUN_DIR/nodes/$name/kubelet.kubeconfig" "kubelet-client-$name" "system:node:$name"
  exit 0
fi

ca
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.$CLUSTER_DOMAIN,DNS:localhost,IP:127.0.0.1,IP:$KUBERNETES_SVC_IP,IP:$APISERVER_IP"
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
cert controller-manager "/CN=system:kube-controller-manager" clientAuth
cert scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
cert kubelet-client "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
cert kubelet "/CN=$NODE_NAME" serverAuth "DNS:$NODE_NAME,IP:$NODE_IP,IP:127.0.0.1"
if [[ ! -s "$PKI/sa.key" ]]; then
  genkey "$PKI/sa.key"
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"
fi
chmod 600 "$PKI"/*.key
kubeconfig "$RUN_DIR/kubeconfig" admin kubernetes-admin
kubeconfig "$RUN_DIR/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
kubeconfig "$RUN_DIR/scheduler.kubeconfig" scheduler system:kube-scheduler
kubeconfig "$RUN_DIR/kube-proxy.kubeconfig" kube-proxy system:kube-proxy
kubeconfig "$RUN_DIR/kubelet.kubeconfig" kubelet-client "system:node:$NODE_NAME"
log "pki + kubeconfigs ready in $RUN_DIR"
