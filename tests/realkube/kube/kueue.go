package main

// The Kueue manager a site runs for real once fabric's D.1 installed the kueue chart: the chart's
// controller-manager Deployment only has kwok's pretend pods, so this runs the real manager
// (`kueue`, sigs.k8s.io/kueue v0.15.2's own main package) out of cluster, the way Kueue's own
// integration tests run it beside envtest's API server. It reads the configuration the chart
// rendered from fabric's values (the Deployment's ConfigMap) and changes only what a process
// on loopback needs:
//   - internalCertManagement off, the webhook on 127.0.0.1 with a certificate of the site's own
//     test CA, and the chart's webhook configurations and CRD conversion webhooks pointed at it by
//     url (their `service` cannot be reached: no pod runs);
//   - metrics, health probes and leader election off (two sites' managers share the machine);
//   - the visibility API off (VisibilityOnDemand=false) and its APIServices removed: its
//     aggregated server would run in the pod;
//   - with internal certificates off, Kueue v0.15.2 reads its metrics certificate from the fixed
//     path /etc/kueue/metrics/certs (cmd/kueue/main.go), where the chart mounts a Secret: the
//     manager runs in a mount namespace of its own (util-linux `unshare`) with an overlay on /etc
//     that holds one, so nothing is written to the machine's /etc.
// A new ConfigMap (a Helm upgrade) restarts the manager; the Deployment's removal stops it.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var (
	deployments  = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	configMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	validating   = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"}
	mutating     = schema.GroupVersionResource{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"}
	crdResource  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	apiServices  = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	kueueManager = "app.kubernetes.io/name=kueue,control-plane=controller-manager"
)

type kueueRunner struct {
	s          *site
	kubeconfig string
	client     dynamic.Interface
	port       int
	caBundle   string
	configHash string
	proc       *exec.Cmd
}

func (s *site) runKueue(kubeconfig string) error {
	client, err := dynamicClient(kubeconfig)
	if err != nil {
		return err
	}
	port, err := freePort("127.0.0.1")
	if err != nil {
		return err
	}
	r := &kueueRunner{s: s, kubeconfig: kubeconfig, client: client, port: port}
	if err := r.certificates(); err != nil {
		return err
	}
	log, err := s.openLog("kueue-runner")
	if err != nil {
		return err
	}
	go func() {
		last := ""
		for {
			// Each new error once: the API server's going away at the end repeats one.
			if err := r.round(context.Background()); err != nil && err.Error() != last {
				last = err.Error()
				fmt.Fprintf(log, "%s %v\n", time.Now().Format(time.RFC3339), err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	return nil
}

func (r *kueueRunner) dir() string { return filepath.Join(r.s.dir, "kueue") }

// certificates issues the webhook's serving certificate for 127.0.0.1 from the site's CA.
func (r *kueueRunner) certificates() error {
	certs := filepath.Join(r.dir(), "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	ca, err := loadPair(filepath.Join(r.s.dir, "pki"), "ca")
	if err != nil {
		return err
	}
	kp, err := issue(ca, certSpec{commonName: "kueue-webhook", dns: []string{"localhost"}, ips: []net.IP{net.ParseIP("127.0.0.1")}, usage: serverAuth})
	if err != nil {
		return err
	}
	if err := writePair(certs, "tls", kp); err != nil {
		return err
	}
	metrics := filepath.Join(r.dir(), "etc-upper", "kueue", "metrics", "certs")
	if err := os.MkdirAll(metrics, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(r.dir(), "etc-work"), 0o700); err != nil {
		return err
	}
	if err := writePair(metrics, "tls", kp); err != nil {
		return err
	}
	// As JSON carries it: unstructured objects hold only JSON values.
	r.caBundle = base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
	return nil
}

func (r *kueueRunner) round(ctx context.Context) error {
	list, err := r.client.Resource(deployments).Namespace("").List(ctx, metav1.ListOptions{LabelSelector: kueueManager})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		r.stop()
		return nil
	}
	ns := list.Items[0].GetNamespace()
	config, err := r.config(ctx, ns)
	if err != nil {
		return err
	}
	if sum := fmt.Sprintf("%x", sha256.Sum256(config)); sum != r.configHash || !r.running() {
		r.stop()
		if err := r.start(config); err != nil {
			return err
		}
		r.configHash = sum
	}
	return r.redirect(ctx)
}

// config is the chart's manager configuration with the changes a loopback process needs.
func (r *kueueRunner) config(ctx context.Context, ns string) ([]byte, error) {
	cms, err := r.client.Resource(configMaps).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	for _, cm := range cms.Items {
		text, ok, _ := unstructured.NestedString(cm.Object, "data", "controller_manager_config.yaml")
		if !ok {
			continue
		}
		var c map[string]any
		if err := yaml.Unmarshal([]byte(text), &c); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", ns, cm.GetName(), err)
		}
		c["namespace"] = ns
		c["internalCertManagement"] = map[string]any{"enable": false}
		c["webhook"] = map[string]any{"host": "127.0.0.1", "port": r.port, "certDir": filepath.Join(r.dir(), "certs")}
		c["metrics"] = map[string]any{"bindAddress": "0"}
		c["health"] = map[string]any{"healthProbeBindAddress": "0"}
		c["leaderElection"] = map[string]any{"leaderElect": false}
		return yaml.Marshal(c)
	}
	return nil, fmt.Errorf("no ConfigMap with controller_manager_config.yaml in %s", ns)
}

func (r *kueueRunner) start(config []byte) error {
	path := filepath.Join(r.dir(), "config.yaml")
	if err := os.WriteFile(path, config, 0o600); err != nil {
		return err
	}
	log, err := r.s.openLog("kueue")
	if err != nil {
		return err
	}
	overlay := fmt.Sprintf("lowerdir=/etc,upperdir=%s,workdir=%s", filepath.Join(r.dir(), "etc-upper"), filepath.Join(r.dir(), "etc-work"))
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount -t overlay overlay -o "$0" /etc && exec "$@"`, overlay,
		filepath.Join(r.s.bin, "kueue"), "--config="+path, "--kubeconfig="+r.kubeconfig,
		"--feature-gates=VisibilityOnDemand=false")
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, r.dir()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	go func() { _ = cmd.Wait(); log.Close() }()
	r.proc = cmd
	return nil
}

func (r *kueueRunner) running() bool {
	return r.proc != nil && r.proc.ProcessState == nil && processAlive(r.proc.Process.Pid)
}

func (r *kueueRunner) stop() {
	if r.proc == nil {
		return
	}
	_ = r.proc.Process.Signal(syscall.SIGTERM)
	for i := 0; i < 100 && r.running(); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	_ = r.proc.Process.Kill()
	r.proc = nil
}

// redirect points Kueue's webhooks and conversion webhooks at the manager on loopback and
// removes the visibility APIServices; it writes only what differs.
func (r *kueueRunner) redirect(ctx context.Context) error {
	url := func(path string) string { return fmt.Sprintf("https://127.0.0.1:%d%s", r.port, path) }
	for _, gvr := range []schema.GroupVersionResource{validating, mutating} {
		list, err := r.client.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, wc := range list.Items {
			if !strings.HasPrefix(wc.GetName(), "kueue-") {
				continue
			}
			hooks, _, _ := unstructured.NestedSlice(wc.Object, "webhooks")
			changed := false
			for i, h := range hooks {
				hook := h.(map[string]any)
				cc, _ := hook["clientConfig"].(map[string]any)
				if svc, ok := cc["service"].(map[string]any); ok {
					path, _ := svc["path"].(string)
					hook["clientConfig"] = map[string]any{"url": url(path), "caBundle": r.caBundle}
					hooks[i], changed = hook, true
				}
			}
			if changed {
				_ = unstructured.SetNestedSlice(wc.Object, hooks, "webhooks")
				if _, err := r.client.Resource(gvr).Update(ctx, &wc, metav1.UpdateOptions{FieldManager: "realkube-kueue"}); err != nil {
					return err
				}
			}
		}
	}
	crds, err := r.client.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, crd := range crds.Items {
		if !strings.HasSuffix(crd.GetName(), ".kueue.x-k8s.io") {
			continue
		}
		svc, ok, _ := unstructured.NestedMap(crd.Object, "spec", "conversion", "webhook", "clientConfig", "service")
		if !ok {
			continue
		}
		path, _ := svc["path"].(string)
		_ = unstructured.SetNestedField(crd.Object, map[string]any{"url": url(path), "caBundle": r.caBundle}, "spec", "conversion", "webhook", "clientConfig")
		if _, err := r.client.Resource(crdResource).Update(ctx, &crd, metav1.UpdateOptions{FieldManager: "realkube-kueue"}); err != nil {
			return err
		}
	}
	services, err := r.client.Resource(apiServices).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, a := range services.Items {
		if strings.HasSuffix(a.GetName(), ".visibility.kueue.x-k8s.io") {
			if err := r.client.Resource(apiServices).Delete(ctx, a.GetName(), metav1.DeleteOptions{}); err != nil {
				return err
			}
		}
	}
	return nil
}
