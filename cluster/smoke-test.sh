#!/usr/bin/env bash
# End-to-end check of a running test cluster (make cluster-up first). Prints one line per check and
# "N passed, N failed" at the end; exit 1 if anything failed. Cleans up its namespace.
. "$(dirname "$0")/lib.sh"
set +e; trap - ERR  # best effort: a failing step is expected, not an error
K8S_BIN="$CACHE/kubernetes-$K8S_VERSION/bin"
K=("$K8S_BIN/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" --request-timeout=30s)
NS=rl-smoke
BASE_REF="$(cat "$("$CLUSTER_DIR/build-images.sh" --dir debian-base)/ref")"
pass=0; fail=0
check() { local what="$1"; shift; if "$@"; then echo "PASS $what"; pass=$((pass+1)); else echo "FAIL $what"; fail=$((fail+1)); fi; }

"${K[@]}" delete namespace "$NS" --ignore-not-found --wait=true --timeout=60s >/dev/null 2>&1
"${K[@]}" create namespace "$NS" >/dev/null
trap '"${K[@]}" delete namespace "$NS" --wait=false >/dev/null 2>&1' EXIT
"${K[@]}" -n "$NS" wait --for=jsonpath='{.metadata.name}'=default serviceaccount/default --timeout=30s >/dev/null 2>&1 ||
  sleep 3

ver="$("${K[@]}" version -o json)"
check "kubectl version: client and server are $K8S_VERSION" \
  python3 -c 'import json,sys; v=json.loads(sys.argv[1]); want=sys.argv[2]; print("  client", v["clientVersion"]["gitVersion"], v["clientVersion"]["gitCommit"][:12], "server", v["serverVersion"]["gitVersion"]); sys.exit(not (v["clientVersion"]["gitVersion"]==want==v["serverVersion"]["gitVersion"]))' "$ver" "$K8S_VERSION"
check "node Ready" bash -c "[[ \$(${K[*]} get nodes -o 'jsonpath={.items[0].status.conditions[?(@.type==\"Ready\")].status}') == True ]]"

"${K[@]}" -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: py-once}
spec:
  restartPolicy: Never
  containers:
  - name: py
    image: $BASE_REF
    imagePullPolicy: Never
    command: [python3, -c, "import sys, platform; print('python', platform.python_version(), 'ok'); sys.exit(0)"]
---
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - name: web
    image: $BASE_REF
    imagePullPolicy: Never
    command: [python3, -m, http.server, "8080"]
    workingDir: /etc
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
YAML
check "pod from the Debian base image runs python3 -c to completion" \
  "${K[@]}" -n "$NS" wait --for=jsonpath='{.status.phase}'=Succeeded pod/py-once --timeout=120s
echo "  log: $("${K[@]}" -n "$NS" logs py-once 2>&1)"
"${K[@]}" -n "$NS" wait --for=condition=Ready pod/web --timeout=120s >/dev/null
WEB_IP="$("${K[@]}" -n "$NS" get pod web -o jsonpath='{.status.podIP}')"
SVC_IP="$("${K[@]}" -n "$NS" get svc web -o jsonpath='{.spec.clusterIP}')"
echo "  web pod IP $WEB_IP, service IP $SVC_IP"

"${K[@]}" -n "$NS" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  restartPolicy: Never
  containers:
  - name: client
    image: $BASE_REF
    imagePullPolicy: Never
    env: [{name: WEB_IP, value: "$WEB_IP"}, {name: SVC_IP, value: "$SVC_IP"}]
    command:
    - python3
    - -c
    - |
      import json, os, socket, ssl, sys, urllib.request
      ok = True
      def step(name, fn):
          global ok
          try:
              print("OK  ", name, fn(), flush=True)
          except Exception as e:
              ok = False
              print("FAIL", name, repr(e), flush=True)
      get = lambda url: urllib.request.urlopen(url, timeout=5).status
      step("dns web.$NS.svc.$CLUSTER_DOMAIN", lambda: socket.gethostbyname("web.$NS.svc.$CLUSTER_DOMAIN"))
      step("dns short name web", lambda: socket.gethostbyname("web"))
      step("pod ip http", lambda: get("http://%s:8080/hostname" % os.environ["WEB_IP"]))
      step("cluster ip http", lambda: get("http://%s:80/hostname" % os.environ["SVC_IP"]))
      step("service name http", lambda: get("http://web/hostname"))
      def api():
          sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
          ctx = ssl.create_default_context(cafile=sa + "ca.crt")
          req = urllib.request.Request("https://kubernetes.default.svc/version",
                                       headers={"Authorization": "Bearer " + open(sa + "token").read()})
          return json.load(urllib.request.urlopen(req, context=ctx, timeout=5))["gitVersion"]
      step("api server via kubernetes Service", api)
      def no_upstream():
          try:
              socket.gethostbyname("pypi.org")
          except socket.gaierror as e:
              return "not resolvable (%s)" % e.strerror
          raise RuntimeError("external name resolved: DNS forwards upstream")
      step("external names are not forwarded", no_upstream)
      sys.exit(0 if ok else 1)
YAML
"${K[@]}" -n "$NS" wait --for=jsonpath='{.status.phase}'=Succeeded pod/client --timeout=120s >/dev/null
"${K[@]}" -n "$NS" logs client 2>&1 | sed 's/^/  /'
check "in-pod networking: DNS, pod IP, ClusterIP, API server via Service, no upstream DNS" \
  bash -c "[[ \$(${K[*]} -n $NS get pod client -o jsonpath='{.status.phase}') == Succeeded ]]"

# An image built by cluster/build-image.sh (cluster/testdata/hello-image), when one has been built.
HELLO=localhost/ringleader/hello:test
if [[ -s "$CACHE/built-images/localhost_ringleader_hello_test/image.tar" ]]; then
  "${K[@]}" -n "$NS" run hello --image "$HELLO" --image-pull-policy Never --restart Never >/dev/null
  check "pod from an image built by build-image.sh ($HELLO) runs" \
    "${K[@]}" -n "$NS" wait --for=jsonpath='{.status.phase}'=Succeeded pod/hello --timeout=120s
  echo "  log: $("${K[@]}" -n "$NS" logs hello 2>&1)"
fi

echo "$pass passed, $fail failed"
(( fail == 0 ))
