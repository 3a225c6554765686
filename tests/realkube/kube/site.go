package main

// `kube site`: one site's control plane on loopback, started the way a K3s server runs its parts
// (k3s pkg/daemon/control/server.go: kine on a unix socket, then the API server, controller
// manager and scheduler with K3s's flags where they matter to fabric), plus kwok standing in for
// the kubelets. Every part is a child process that dies with this one (Pdeathsig), so a test that
// is killed leaves nothing running. It prints "ready <kubeconfig>" once /readyz answers and the
// default service account exists, then waits for SIGTERM, SIGINT or, with --stdin-lifeline, the
// end of its standard input.

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

type site struct {
	dir, name, bin string
	// The API server's address and port, and the cluster's ranges (K3s's --cluster-cidr and
	// --service-cidr, which a topology sets per site).
	address, serviceCIDR, clusterCIDR string
	port                              int
	children                          []*exec.Cmd
	// exited gets the name of a part that ended, so a wait gives up at once instead of at its
	// time limit.
	exited chan string
}

func runSite(args []string) int {
	fs := flag.NewFlagSet("site", flag.ContinueOnError)
	dir := fs.String("dir", "", "the site's data folder (made if missing; kept between starts)")
	name := fs.String("name", "", "the site's name (its CA's and kubeconfig context's name)")
	address := fs.String("address", "127.0.0.1", "the API server's address (a loopback one: 127.0.0.0/8)")
	port := fs.Int("port", 0, "the API server's port (0: a free one)")
	serviceCIDR := fs.String("service-cidr", "10.43.0.0/16", "the Services' range (K3s's default)")
	clusterCIDR := fs.String("cluster-cidr", "10.42.0.0/16", "the Pods' range (K3s's default)")
	noKwok := fs.Bool("no-kwok", false, "run no kwok (a control plane without nodes)")
	crds := fs.String("crds", "", "a folder of CRDs applied before the site is ready, as K3s applies helm-controller's at start")
	charts := fs.String("charts", "", "run K3s's helm-controller and the klipper stand-in, installing charts from this folder")
	lifeline := fs.Bool("stdin-lifeline", false, "stop when standard input closes")
	if err := fs.Parse(args); err != nil || *dir == "" || *name == "" {
		fmt.Fprintln(os.Stderr, "usage: kube site --dir DIR --name NAME [--port N] [--no-kwok] [--stdin-lifeline]")
		return 2
	}
	s, err := newSite(*dir, *name, *address, *port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s.serviceCIDR, s.clusterCIDR = *serviceCIDR, *clusterCIDR
	return s.serve(func() error { return s.up(!*noKwok, *crds, *charts) }, *lifeline)
}

// newSite is a control plane named name (its CA's and kubeconfig context's name) with its data
// in dir, its parts' binaries beside this one.
func newSite(dir, name, address string, port int) (*site, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return &site{dir: abs, name: name, bin: filepath.Dir(self), port: port, exited: make(chan string, 16), address: address}, nil
}

// serve is the life of `kube site` and `kube karmada`: up, the ready line, the wait for the end,
// then the parts stopped; the exit code.
func (s *site) serve(up func() error, lifeline bool) int {
	// Pdeathsig is tied to the thread that started the child: keep one thread for all of them.
	runtime.LockOSThread()
	err := up()
	if err == nil {
		fmt.Printf("ready %s\n", filepath.Join(s.dir, "kubeconfig"))
		s.wait(lifeline)
	}
	s.stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.name, err)
		return 1
	}
	return 0
}

func (s *site) up(kwok bool, crds, charts string) error {
	kubeconfig, client, base, err := s.startAPI(s.apiserverFlags)
	if err != nil {
		return err
	}
	common := []string{"--kubeconfig", kubeconfig, "--leader-elect=false", "--profiling=false", "--secure-port=0"}
	pki := filepath.Join(s.dir, "pki")
	cm := append([]string{"controller-manager"}, common...)
	cm = append(cm,
		"--allocate-node-cidrs=true", "--cluster-cidr="+s.clusterCIDR, "--service-cluster-ip-range="+s.serviceCIDR,
		"--cluster-signing-cert-file="+filepath.Join(pki, "ca.crt"), "--cluster-signing-key-file="+filepath.Join(pki, "ca.key"),
		"--controllers=*,tokencleaner,-service,-route,-cloud-node-lifecycle",
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--service-account-private-key-file="+filepath.Join(pki, "service-account.key"),
		"--use-service-account-credentials=true",
		"--configure-cloud-routes=false")
	if err := s.start("controller-manager", filepath.Join(s.bin, "kube"), cm...); err != nil {
		return err
	}
	if err := s.start("scheduler", filepath.Join(s.bin, "kube"), append([]string{"scheduler"}, common...)...); err != nil {
		return err
	}
	if kwok {
		// kwok manages only Nodes marked for it, as its docs' examples do, so a test can add a
		// node kwok leaves alone (one whose kubelet never reports).
		if err := s.start("kwok", filepath.Join(s.bin, "kwok"), "--kubeconfig", kubeconfig,
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--cidr="+s.clusterCIDR, "--node-ip=127.0.0.1", "--server-address=", "--node-lease-duration-seconds=40"); err != nil {
			return err
		}
	}
	// K3s's packaged manifests that fabric relies on: the RuntimeClasses of its runtimes.yaml
	// (the `nvidia` one for the NVIDIA container runtime), which K3s's deploy controller applies
	// at start.
	if err := s.kubectlInput(kubeconfig, k3sRuntimeClasses, "apply", "--server-side", "--field-manager=k3s", "-f", "-"); err != nil {
		return err
	}
	if crds != "" {
		if err := s.applyCRDs(kubeconfig, crds); err != nil {
			return err
		}
	}
	if charts != "" {
		// K3s runs helm-controller inside the server with the node's name; its Jobs run the
		// klipper-helm image, which the klipper stand-in plays (tests/realkube/helm).
		if err := s.start("helm-controller", filepath.Join(s.bin, "helm-controller"), "--kubeconfig", kubeconfig,
			"--controller-name", "helm-controller", "--node-name", s.name+"-server"); err != nil {
			return err
		}
		// scripts/realkube.sh build puts the charts' undelivered dependencies beside the binaries.
		deps := filepath.Join(s.bin, "chart-deps")
		if err := s.start("klipper", filepath.Join(s.bin, "klipper"), "--kubeconfig", kubeconfig, "--charts", charts, "--deps", deps); err != nil {
			return err
		}
		// What the charts' pods would run and can run here: Kueue's manager (kueue.go); and
		// what a CNI changes for the nodes (cni.go).
		if err := s.runKueue(kubeconfig); err != nil {
			return err
		}
		if err := s.runCNI(kubeconfig); err != nil {
			return err
		}
	}
	// The default ServiceAccount is made by the controller manager; a Pod cannot be created
	// before it exists, so the site is ready only then.
	return s.waitFor(60*time.Second, func() error {
		return get(client, base+"/api/v1/namespaces/default/serviceaccounts/default")
	})
}

// k3sRuntimeClasses are the NVIDIA RuntimeClasses of K3s v1.33.5's manifests/runtimes.yaml
// (k3s-io/k3s at v1.33.5+k3s1; its other runtimes' classes are left out: nothing here uses them).
const k3sRuntimeClasses = `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia
handler: nvidia
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata:
  name: nvidia-experimental
handler: nvidia-experimental
`

// kubectlInput runs the site's kubectl with input on its standard input.
func (s *site) kubectlInput(kubeconfig, input string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, "kube"), append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
	}
	return nil
}

// startAPI starts a control plane's datastore and API server (a site's, or Karmada's with its
// flags): the data folders, the PKI (made the first time), the admin's kubeconfig, kine with
// SQLite on a unix socket and the API server with flags(socket); it waits until /readyz answers.
// It returns the kubeconfig, an admin client and the API's base URL.
func (s *site) startAPI(flags func(sock string) []string) (string, *http.Client, string, error) {
	for _, d := range []string{"db", "logs"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o700); err != nil {
			return "", nil, "", err
		}
	}
	apiService, err := firstAddress(s.serviceCIDR)
	if err != nil {
		return "", nil, "", err
	}
	if err := ensurePKI(s.dir, s.name, []net.IP{net.ParseIP(s.address), apiService}); err != nil {
		return "", nil, "", fmt.Errorf("pki: %w", err)
	}
	if s.port == 0 {
		if s.port, err = freePort(s.address); err != nil {
			return "", nil, "", err
		}
	}
	kubeconfig, err := s.writeKubeconfig()
	if err != nil {
		return "", nil, "", err
	}
	sock := filepath.Join(s.dir, "kine.sock")
	_ = os.Remove(sock)
	// SQLite in WAL mode, the datastore of a K3s server without --cluster-init.
	dsn := "sqlite://" + filepath.Join(s.dir, "db", "state.db") + "?_journal=WAL&cache=shared&_busy_timeout=30000&_txlock=immediate"
	if err := s.start("kine", filepath.Join(s.bin, "kine"), "--endpoint", dsn, "--listen-address", "unix://"+sock, "--metrics-bind-address=0"); err != nil {
		return "", nil, "", err
	}
	if err := s.waitFor(20*time.Second, func() error { _, err := os.Stat(sock); return err }); err != nil {
		return "", nil, "", fmt.Errorf("kine did not listen on %s: %w (logs/kine.log)", sock, err)
	}
	if err := s.start("apiserver", filepath.Join(s.bin, "kube"), append([]string{"apiserver"}, flags(sock)...)...); err != nil {
		return "", nil, "", err
	}
	client, err := s.adminClient()
	if err != nil {
		return "", nil, "", err
	}
	base := fmt.Sprintf("https://%s", net.JoinHostPort(s.address, strconv.Itoa(s.port)))
	if err := s.waitFor(90*time.Second, func() error { return get(client, base+"/readyz") }); err != nil {
		return "", nil, "", fmt.Errorf("the API server was not ready: %w (logs/apiserver.log)", err)
	}
	return kubeconfig, client, base, nil
}

// applyCRDs applies the CRDs of a folder with the site's own kubectl and waits until they are
// served, as K3s does with helm-controller's before it starts the controller.
func (s *site) applyCRDs(kubeconfig, dir string) error {
	kubectl := func(args ...string) error {
		cmd := exec.Command(filepath.Join(s.bin, "kube"), append([]string{"kubectl", "--kubeconfig", kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("kubectl %v: %w: %s", args, err, out)
		}
		return nil
	}
	if err := kubectl("apply", "--server-side", "--field-manager=k3s", "-f", dir); err != nil {
		return err
	}
	return kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
}

func (s *site) apiserverFlags(sock string) []string {
	pki := filepath.Join(s.dir, "pki")
	p := func(f string) string { return filepath.Join(pki, f) }
	return []string{
		"--advertise-address=" + s.address, "--bind-address=" + s.address, "--secure-port=" + strconv.Itoa(s.port),
		"--etcd-servers=unix://" + sock, "--storage-backend=etcd3",
		// No Endpoints for the "kubernetes" Service: its address would be loopback, which the
		// API refuses in Endpoints; nothing in the suite reaches the API through that Service.
		"--endpoint-reconciler-type=none",
		"--allow-privileged=true", "--anonymous-auth=false", "--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction", "--profiling=false",
		"--client-ca-file=" + p("ca.crt"), "--tls-cert-file=" + p("serving.crt"), "--tls-private-key-file=" + p("serving.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--api-audiences=https://kubernetes.default.svc.cluster.local,k3s",
		"--service-account-key-file=" + p("service-account.pub"), "--service-account-signing-key-file=" + p("service-account.key"),
		"--service-cluster-ip-range=" + s.serviceCIDR, "--service-node-port-range=30000-32767",
		"--requestheader-client-ca-file=" + p("front-proxy-ca.crt"), "--requestheader-allowed-names=system:auth-proxy",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-username-headers=X-Remote-User",
		"--proxy-client-cert-file=" + p("front-proxy-client.crt"), "--proxy-client-key-file=" + p("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
	}
}

// start runs one part with its output in logs/<name>.log; it is killed if this process dies.
func (s *site) start(name, bin string, args ...string) error {
	log, err := s.openLog(name)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr, cmd.Dir = log, log, s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.children = append(s.children, cmd)
	go func() { _ = cmd.Wait(); log.Close(); s.exited <- name }()
	return nil
}

func (s *site) wait(lifeline bool) {
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer cancel()
	if lifeline {
		go func() { _, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin)); cancel() }()
	}
	<-ctx.Done()
}

// stop ends the parts in the reverse order of their start, each given five seconds.
func (s *site) stop() {
	for i := len(s.children) - 1; i >= 0; i-- {
		c := s.children[i]
		_ = c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for c.ProcessState == nil && processAlive(c.Process.Pid) {
				time.Sleep(50 * time.Millisecond)
			}
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = c.Process.Kill()
		}
	}
}

func processAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func (s *site) writeKubeconfig() (string, error) {
	pki := filepath.Join(s.dir, "pki")
	read := func(f string) (string, error) {
		b, err := os.ReadFile(filepath.Join(pki, f))
		return base64.StdEncoding.EncodeToString(b), err
	}
	ca, err := read("ca.crt")
	if err != nil {
		return "", err
	}
	crt, err := read("admin.crt")
	if err != nil {
		return "", err
	}
	key, err := read("admin.key")
	if err != nil {
		return "", err
	}
	y := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: %[1]s
  cluster:
    server: https://%[2]s
    certificate-authority-data: %[3]s
users:
- name: %[1]s-admin
  user:
    client-certificate-data: %[4]s
    client-key-data: %[5]s
contexts:
- name: %[1]s
  context:
    cluster: %[1]s
    user: %[1]s-admin
current-context: %[1]s
`, s.name, net.JoinHostPort(s.address, strconv.Itoa(s.port)), ca, crt, key)
	path := filepath.Join(s.dir, "kubeconfig")
	return path, os.WriteFile(path, []byte(y), 0o600)
}

func (s *site) adminClient() (*http.Client, error) {
	pki := filepath.Join(s.dir, "pki")
	pair, err := tls.LoadX509KeyPair(filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(filepath.Join(pki, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
	}}, nil
}

func get(c *http.Client, url string) error {
	r, err := c.Get(url)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 512))
		return fmt.Errorf("%s: %s %s", url, r.Status, b)
	}
	return nil
}

// waitFor retries f until it succeeds, the limit passes or a part of the site ends.
func (s *site) waitFor(limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case name := <-s.exited:
			return fmt.Errorf("%s ended (logs/%s.log): %w", name, name, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// firstAddress is a range's first host address, the "kubernetes" Service's ClusterIP.
func firstAddress(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, err
	}
	ip := n.IP.To4()
	if ip == nil {
		return nil, fmt.Errorf("%s: only IPv4 ranges", cidr)
	}
	first := make(net.IP, 4)
	copy(first, ip)
	first[3]++
	return first, nil
}

func freePort(address string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(address, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// openLog opens logs/<name>.log of the site for appending.
func (s *site) openLog(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(s.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

// dynamicClient is a client of the site's API server for the loops that stand in for a pod.
func dynamicClient(kubeconfig string) (dynamic.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}
