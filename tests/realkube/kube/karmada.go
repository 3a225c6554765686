package main

// `kube karmada`: Karmada's control plane out of cluster on loopback, the parts Karmada's own
// installers run as pods in the host cluster (karmada-io/karmada v1.16.0 artifacts/deploy/*.yaml,
// which `hack/deploy-karmada.sh` and the chart render alike), each started with those manifests'
// flags where they matter here:
//   - karmada-apiserver: a kube-apiserver with Karmada's flags (artifacts/deploy/karmada-apiserver.yaml)
//     — our `kube apiserver`, Kubernetes v1.33.5 — on a kine datastore of its own (the chart's
//     karmada-etcd), with its own CA, service-account keys and front-proxy CA;
//   - kube-controller-manager for it, with Karmada's controller list (artifacts/deploy/kube-controller-manager.yaml):
//     the namespace and garbage collectors Karmada's objects rely on;
//   - karmada-aggregated-apiserver (cluster.karmada.io: Cluster objects), on the same kine, and
//     its APIService reaching it through an ExternalName Service to localhost;
//   - karmada-webhook on 127.0.0.1 with a certificate of this control plane's CA; the webhook
//     configurations (artifacts/deploy/webhook-configuration.yaml) and the conversion webhooks of
//     the binding CRDs (charts/karmada/_crds/patches) point at it by url;
//   - karmada-controller-manager and karmada-scheduler, and with --estimator one
//     karmada-scheduler-estimator per member, each reached by the scheduler through an
//     ExternalName Service `karmada-scheduler-estimator-<cluster>` as Karmada resolves it
//     (pkg/estimator/client/service.go).
// Karmada's CRDs are those of the v1.16.0 module (charts/karmada/_crds/bases), which
// scripts/realkube.sh build copies to target/realkube/karmada/ with the two manifests above.
// Metrics and health endpoints are off and leader election too (one replica each). What the
// chart's post-install Job adds for pull mode and the cluster proxy (bootstrap tokens, RBAC) is
// not applied: the members join in push mode.
//
// It prints "ready <kubeconfig>" (context karmada-apiserver, the admin's certificate) once the
// API, the aggregated API and the webhook answer, then waits as `kube site` does.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type karmada struct {
	*site
	assets                               string
	aggregatedPort, webhookPort          int
	caBundle                             string
	controllerManagerArgs, schedulerArgs []string
	estimators                           map[string]string
	estimatorOrder                       []string
}

func runKarmada(args []string) int {
	fs := flag.NewFlagSet("karmada", flag.ContinueOnError)
	dir := fs.String("dir", "", "the control plane's data folder (made if missing; kept between starts)")
	address := fs.String("address", "127.0.0.1", "karmada-apiserver's address (a loopback one)")
	port := fs.Int("port", 0, "karmada-apiserver's port (0: a free one)")
	assets := fs.String("assets", "", "Karmada's CRDs and manifests, as scripts/realkube.sh build copies them from the module (default: karmada/ beside this binary)")
	var cmArgs, schedArgs, estimators stringList
	fs.Var(&cmArgs, "controller-manager-arg", "a flag for karmada-controller-manager (repeatable), e.g. --feature-gates=Failover=true as the chart's values render it")
	fs.Var(&schedArgs, "scheduler-arg", "a flag for karmada-scheduler (repeatable)")
	fs.Var(&estimators, "estimator", "CLUSTER=KUBECONFIG: run a karmada-scheduler-estimator for that member (repeatable); the scheduler then uses them")
	lifeline := fs.Bool("stdin-lifeline", false, "stop when standard input closes")
	if err := fs.Parse(args); err != nil || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: kube karmada --dir DIR [--address A] [--port N] [--controller-manager-arg F]... [--estimator CLUSTER=KUBECONFIG]... [--stdin-lifeline]")
		return 2
	}
	// The kubeconfig's context is karmada-apiserver, as Karmada's installers name it.
	s, err := newSite(*dir, "karmada-apiserver", *address, *port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Karmada's installers' ranges (artifacts/deploy/karmada-apiserver.yaml, kube-controller-manager.yaml).
	s.serviceCIDR, s.clusterCIDR = "10.96.0.0/12", "10.244.0.0/16"
	if *assets == "" {
		*assets = filepath.Join(s.bin, "karmada-assets")
	}
	k := &karmada{site: s, assets: *assets, controllerManagerArgs: cmArgs, schedulerArgs: schedArgs, estimators: map[string]string{}}
	for _, e := range estimators {
		name, kc, ok := strings.Cut(e, "=")
		if !ok || name == "" || kc == "" {
			fmt.Fprintf(os.Stderr, "--estimator %q: want CLUSTER=KUBECONFIG\n", e)
			return 2
		}
		k.estimators[name] = kc
		k.estimatorOrder = append(k.estimatorOrder, name)
	}
	return k.serve(k.up, *lifeline)
}

func (k *karmada) up() error {
	if err := os.MkdirAll(filepath.Join(k.dir, "certs"), 0o700); err != nil {
		return err
	}
	kubeconfig, client, base, err := k.startAPI(k.apiserverFlags)
	if err != nil {
		return err
	}
	for _, p := range []*int{&k.aggregatedPort, &k.webhookPort} {
		if *p, err = freePort("127.0.0.1"); err != nil {
			return err
		}
	}
	if err := k.certificates(); err != nil {
		return err
	}
	sock := filepath.Join(k.dir, "kine.sock")
	pki := filepath.Join(k.dir, "pki")
	p := func(f string) string { return filepath.Join(pki, f) }
	if err := k.start("kube-controller-manager", filepath.Join(k.bin, "kube"), "controller-manager",
		"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--leader-elect=false", "--profiling=false", "--secure-port=0", "--cluster-name=karmada",
		"--controllers=namespace,garbagecollector,serviceaccount-token,ttl-after-finished,bootstrapsigner,tokencleaner,csrcleaner,csrsigning,clusterrole-aggregation",
		"--cluster-signing-cert-file="+p("ca.crt"), "--cluster-signing-key-file="+p("ca.key"),
		"--root-ca-file="+p("ca.crt"), "--service-account-private-key-file="+p("service-account.key"),
		"--service-cluster-ip-range="+k.serviceCIDR, "--use-service-account-credentials=true"); err != nil {
		return err
	}
	if err := k.applyCRDs(kubeconfig); err != nil {
		return err
	}
	karmadaBin := filepath.Join(k.bin, "karmada")
	certs := filepath.Join(k.dir, "certs")
	// artifacts/deploy/karmada-aggregated-apiserver.yaml; its etcd is the API server's.
	if err := k.start("karmada-aggregated-apiserver", karmadaBin, "aggregated-apiserver",
		"--kubeconfig", kubeconfig, "--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--etcd-servers=unix://"+sock,
		// kine compacts by itself and has no dbstat table: the k8s.io/apiserver v0.34 compactor
		// and size poller only log errors against it ("failed to parse compact revision").
		"--etcd-compaction-interval=0", "--etcd-db-metric-poll-interval=0",
		"--tls-cert-file="+filepath.Join(certs, "aggregated.crt"), "--tls-private-key-file="+filepath.Join(certs, "aggregated.key"),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(k.aggregatedPort),
		"--audit-log-path=-", "--audit-log-maxage=0", "--audit-log-maxbackup=0", "--tls-min-version=VersionTLS13"); err != nil {
		return err
	}
	// artifacts/deploy/karmada-webhook.yaml
	if err := k.start("karmada-webhook", karmadaBin, "webhook", "--kubeconfig", kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(k.webhookPort), "--cert-dir="+filepath.Join(certs, "webhook"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--feature-gates=AllAlpha=true,AllBeta=true", "--allow-no-execute-taint-policy=true"); err != nil {
		return err
	}
	if err := k.register(kubeconfig); err != nil {
		return err
	}
	// artifacts/deploy/karmada-controller-manager.yaml, with the chart's values' flags after.
	cm := []string{"controller-manager", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--cluster-status-update-frequency=10s", "--controllers=*,hpaScaleTargetMarker,deploymentReplicasSyncer"}
	if err := k.start("karmada-controller-manager", karmadaBin, append(cm, k.controllerManagerArgs...)...); err != nil {
		return err
	}
	// artifacts/deploy/karmada-scheduler.yaml
	sched := []string{"scheduler", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}
	if len(k.estimators) > 0 {
		sched = append(sched, "--enable-scheduler-estimator=true",
			"--scheduler-estimator-ca-file="+p("ca.crt"),
			"--scheduler-estimator-cert-file="+filepath.Join(certs, "estimator-client.crt"),
			"--scheduler-estimator-key-file="+filepath.Join(certs, "estimator-client.key"))
	}
	if err := k.start("karmada-scheduler", karmadaBin, append(sched, k.schedulerArgs...)...); err != nil {
		return err
	}
	if err := k.startEstimators(kubeconfig); err != nil {
		return err
	}
	// Ready when the aggregated API serves Clusters and the webhook admits a policy (a dry run
	// through the mutating and validating webhooks).
	if err := k.waitFor(90*time.Second, func() error { return get(client, base+"/apis/cluster.karmada.io/v1alpha1/clusters") }); err != nil {
		return fmt.Errorf("the aggregated API (cluster.karmada.io) was not served: %w (logs/karmada-aggregated-apiserver.log)", err)
	}
	return k.waitFor(60*time.Second, func() error { return k.dryRunPolicy(kubeconfig) })
}

func (k *karmada) apiserverFlags(sock string) []string {
	pki := filepath.Join(k.dir, "pki")
	p := func(f string) string { return filepath.Join(pki, f) }
	return []string{
		"--advertise-address=" + k.address, "--bind-address=" + k.address, "--secure-port=" + strconv.Itoa(k.port),
		"--etcd-servers=unix://" + sock, "--storage-backend=etcd3",
		"--endpoint-reconciler-type=none",
		// Karmada's flags (artifacts/deploy/karmada-apiserver.yaml).
		"--allow-privileged=true", "--authorization-mode=Node,RBAC", "--enable-bootstrap-token-auth=true",
		"--disable-admission-plugins=StorageObjectInUseProtection,ServiceAccount", "--runtime-config=",
		"--tls-min-version=VersionTLS13", "--anonymous-auth=false", "--profiling=false",
		"--client-ca-file=" + p("ca.crt"), "--tls-cert-file=" + p("serving.crt"), "--tls-private-key-file=" + p("serving.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p("service-account.pub"), "--service-account-signing-key-file=" + p("service-account.key"),
		"--service-cluster-ip-range=" + k.serviceCIDR,
		"--requestheader-client-ca-file=" + p("front-proxy-ca.crt"), "--requestheader-allowed-names=system:auth-proxy",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + p("front-proxy-client.crt"), "--proxy-client-key-file=" + p("front-proxy-client.key"),
		// No --enable-aggregator-routing (as Karmada's manifest): the aggregator then resolves
		// the APIService's Service, and an ExternalName one to its name
		// (k8s.io/apiserver pkg/util/proxy ResolveCluster).
	}
}

// certificates issues, from the control plane's CA, the serving certificates of the aggregated
// API server (for the name the aggregator verifies, <service>.<namespace>.svc) and the
// webhook, the estimators' serving certificate and the scheduler's client certificate for them.
func (k *karmada) certificates() error {
	certs := filepath.Join(k.dir, "certs")
	ca, err := loadPair(filepath.Join(k.dir, "pki"), "ca")
	if err != nil {
		return err
	}
	local := []net.IP{net.ParseIP("127.0.0.1")}
	clientAuth := []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	for _, c := range []struct {
		dir, name string
		spec      certSpec
	}{
		{certs, "aggregated", certSpec{commonName: "karmada-aggregated-apiserver", dns: []string{"localhost", "karmada-aggregated-apiserver.karmada-system.svc"}, ips: local, usage: serverAuth}},
		{filepath.Join(certs, "webhook"), "tls", certSpec{commonName: "karmada-webhook", dns: []string{"localhost"}, ips: local, usage: serverAuth}},
		{certs, "estimator", certSpec{commonName: "karmada-scheduler-estimator", dns: []string{"localhost"}, ips: local, usage: serverAuth}},
		{certs, "estimator-client", certSpec{commonName: "karmada-scheduler", usage: clientAuth}},
	} {
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return err
		}
		kp, err := issue(ca, c.spec)
		if err != nil {
			return err
		}
		if err := writePair(c.dir, c.name, kp); err != nil {
			return err
		}
	}
	k.caBundle = base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	return nil
}

func (k *karmada) kubectl(kubeconfig string, input []byte, args ...string) error {
	cmd := exec.Command(filepath.Join(k.bin, "kube"), append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
	if input != nil {
		cmd.Stdin = strings.NewReader(string(input))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return nil
}

// applyCRDs applies the module's CRDs with the conversion webhook patches of the chart's
// kustomization (charts/karmada/_crds/patches) pointed at the webhook on loopback.
func (k *karmada) applyCRDs(kubeconfig string) error {
	patches := map[string]map[string]any{}
	files, err := filepath.Glob(filepath.Join(k.assets, "crds", "patches", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		var patch map[string]any
		if err := readYAML(f, &patch); err != nil {
			return err
		}
		meta, _ := patch["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		spec, _ := patch["spec"].(map[string]any)
		conv, _ := spec["conversion"].(map[string]any)
		webhook, _ := conv["webhook"].(map[string]any)
		cc, _ := webhook["clientConfig"].(map[string]any)
		if name == "" || cc == nil {
			return fmt.Errorf("%s: not a conversion webhook patch", f)
		}
		url, _ := cc["url"].(string)
		cc["url"] = k.webhookURL(url)
		cc["caBundle"] = k.caBundle
		patches[name] = conv
	}
	bases, err := filepath.Glob(filepath.Join(k.assets, "crds", "bases", "*", "*.yaml"))
	if err != nil {
		return err
	}
	if len(bases) == 0 {
		return fmt.Errorf("no CRDs in %s/crds/bases (scripts/realkube.sh build copies them)", k.assets)
	}
	var items []any
	for _, f := range bases {
		var crd map[string]any
		if err := readYAML(f, &crd); err != nil {
			return err
		}
		meta, _ := crd["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		if conv, ok := patches[name]; ok {
			crd["spec"].(map[string]any)["conversion"] = conv
			delete(patches, name)
		}
		items = append(items, crd)
	}
	if len(patches) > 0 {
		return fmt.Errorf("conversion patches for CRDs not in the bases: %v", patches)
	}
	list, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	if err := k.kubectl(kubeconfig, list, "apply", "--server-side", "--field-manager=karmada-install", "-f", "-"); err != nil {
		return err
	}
	return k.kubectl(kubeconfig, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
}

// webhookURL is upstream's in-cluster webhook URL moved to the webhook on loopback (same path).
func (k *karmada) webhookURL(upstream string) string {
	path := upstream
	if i := strings.Index(upstream, ".svc"); i >= 0 {
		if j := strings.Index(upstream[i:], "/"); j >= 0 {
			path = upstream[i+j:]
		}
	}
	return fmt.Sprintf("https://127.0.0.1:%d%s", k.webhookPort, path)
}

// register writes what Karmada's installers write in karmada-apiserver for its servers: the
// namespace, the aggregated API's APIService and Service (artifacts/deploy/
// karmada-aggregated-apiserver-apiservice.yaml, the Service's externalName localhost and the
// port ours), and the webhook configurations (artifacts/deploy/webhook-configuration.yaml, the
// urls on loopback).
func (k *karmada) register(kubeconfig string) error {
	ns := []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: karmada-system\n")
	if err := k.kubectl(kubeconfig, ns, "apply", "--server-side", "--field-manager=karmada-install", "-f", "-"); err != nil {
		return err
	}
	var items []any
	docs, err := readYAMLDocs(filepath.Join(k.assets, "karmada-aggregated-apiserver-apiservice.yaml"), k.caBundle)
	if err != nil {
		return err
	}
	for _, d := range docs {
		spec, _ := d["spec"].(map[string]any)
		switch d["kind"] {
		case "APIService":
			svc, _ := spec["service"].(map[string]any)
			svc["port"] = k.aggregatedPort
		case "Service":
			spec["externalName"] = "localhost"
		}
		items = append(items, d)
	}
	docs, err = readYAMLDocs(filepath.Join(k.assets, "webhook-configuration.yaml"), k.caBundle)
	if err != nil {
		return err
	}
	for _, d := range docs {
		hooks, _ := d["webhooks"].([]any)
		for _, h := range hooks {
			cc := h.(map[string]any)["clientConfig"].(map[string]any)
			cc["url"] = k.webhookURL(cc["url"].(string))
		}
		items = append(items, d)
	}
	list, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	return k.kubectl(kubeconfig, list, "apply", "--server-side", "--field-manager=karmada-install", "-f", "-")
}

// startEstimators runs one karmada-scheduler-estimator per member (artifacts/deploy/
// karmada-scheduler-estimator.yaml) and the ExternalName Service the scheduler finds it by.
func (k *karmada) startEstimators(kubeconfig string) error {
	certs := filepath.Join(k.dir, "certs")
	pki := filepath.Join(k.dir, "pki")
	var items []any
	for _, name := range k.estimatorOrder {
		port, err := freePort("127.0.0.1")
		if err != nil {
			return err
		}
		if err := k.start("karmada-scheduler-estimator-"+name, filepath.Join(k.bin, "karmada"), "scheduler-estimator",
			"--kubeconfig", k.estimators[name], "--cluster-name="+name,
			// Upstream has no address flag: the gRPC server listens on every interface.
			"--server-port="+strconv.Itoa(port),
			"--grpc-auth-cert-file="+filepath.Join(certs, "estimator.crt"), "--grpc-auth-key-file="+filepath.Join(certs, "estimator.key"),
			"--grpc-client-ca-file="+filepath.Join(pki, "ca.crt"),
			"--metrics-bind-address=0", "--health-probe-bind-address=0"); err != nil {
			return err
		}
		items = append(items, map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "karmada-scheduler-estimator-" + name, "namespace": "karmada-system"},
			"spec": map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "grpc", "port": 10352, "targetPort": port}}},
		})
	}
	if len(items) == 0 {
		return nil
	}
	list, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	return k.kubectl(kubeconfig, list, "apply", "--server-side", "--field-manager=karmada-install", "-f", "-")
}

// dryRunPolicy creates a PropagationPolicy in dry-run mode: it passes both webhooks only when
// karmada-webhook serves.
func (k *karmada) dryRunPolicy(kubeconfig string) error {
	policy := []byte(`apiVersion: policy.karmada.io/v1alpha1
kind: PropagationPolicy
metadata:
  name: realkube-ready
  namespace: default
spec:
  resourceSelectors:
  - apiVersion: v1
    kind: ConfigMap
    name: realkube-ready
`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}}).DialContext(ctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(k.webhookPort)))
	if err != nil {
		return err
	}
	conn.Close()
	return k.kubectl(kubeconfig, policy, "create", "--dry-run=server", "-f", "-")
}

func readYAML(path string, into any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readYAMLDocs reads a multi-document manifest with its {{caBundle}} placeholder filled.
func readYAMLDocs(path, caBundle string) ([]map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(string(b), "{{caBundle}}", caBundle)
	var docs []map[string]any
	for _, part := range strings.Split(text, "\n---") {
		var d map[string]any
		if err := yaml.Unmarshal([]byte(part), &d); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
	return docs, nil
}
