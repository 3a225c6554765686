// Command klipper does, for the suite's real control planes, what the container of a K3s
// helm-install Job does (k3s-io/klipper-helm, `entry`): it installs, upgrades or deletes the
// HelmChart's release with the real Helm library, from the chart archive, the values files and
// the flags helm-controller gave the Job.
//
// What is helm-controller's and what is ours: the real helm-controller (k3s-io/helm-controller,
// built beside this) makes the Job, its values Secret and its pod spec, and the real scheduler
// places the pod (a non-bootstrap pod waits while every node is NotReady). This program stands
// in only for the container in that pod: it waits until the pod is bound to a node, runs what
// `entry` would run, and writes the container's end in the pod's status as the kubelet would
// (exit 0: the pod Succeeded and the Job completes; a failure: the container's last state holds
// Helm's message and it is run again after a back-off, as a kubelet restarts an OnFailure
// container). Charts come from a local folder instead of a repository: `<name>-<version>.tgz`,
// where name is the last path element of the Job's CHART. A chart whose archive does not carry
// a dependency it declares (Karmada's needs Bitnami's `common`, which its release packs in; the
// archive in ../shared/specs/charts is the repository's folder) gets it from --deps, as `helm
// dependency build` would have put it in before the chart was published.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// chartLabel is the label helm-controller puts on its Jobs' pods.
const chartLabel = "helmcharts.helm.cattle.io/chart"

type klipper struct {
	kubeconfig, charts, deps string
	client                   kubernetes.Interface
	// retryAt holds, per pod uid, when a failed install is run again.
	retryAt map[types.UID]time.Time
	tries   map[types.UID]int32
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the site's kubeconfig")
	charts := flag.String("charts", "", "the folder of chart archives (<name>-<version>.tgz)")
	deps := flag.String("deps", "", "a folder of chart folders that charts may depend on (<name>/Chart.yaml)")
	flag.Parse()
	if *kubeconfig == "" || *charts == "" {
		fmt.Fprintln(os.Stderr, "usage: klipper --kubeconfig FILE --charts DIR")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k := &klipper{kubeconfig: *kubeconfig, charts: *charts, deps: *deps, client: kubernetes.NewForConfigOrDie(cfg),
		retryAt: map[types.UID]time.Time{}, tries: map[types.UID]int32{}}
	for {
		k.round(context.Background())
		time.Sleep(300 * time.Millisecond)
	}
}

// round runs every helm-install pod that is bound to a node and has not ended yet.
func (k *klipper) round(ctx context.Context) {
	pods, err := k.client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: chartLabel})
	if err != nil {
		fmt.Fprintln(os.Stderr, "list pods:", err)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if t, ok := k.retryAt[p.UID]; ok && time.Now().Before(t) {
			continue
		}
		err := k.run(ctx, p)
		if err := k.report(ctx, p, err); err != nil {
			fmt.Fprintf(os.Stderr, "pod %s/%s status: %v\n", p.Namespace, p.Name, err)
		}
	}
}

// job is what `entry` reads from its environment, arguments and mounted values.
type job struct {
	action, name, chart, version, namespace string
	createNamespace                         bool
	sets, stringSets                        []string
	valueFiles                              []string
	timeout                                 time.Duration
}

func (k *klipper) run(ctx context.Context, p *corev1.Pod) error {
	j, cleanup, err := k.read(ctx, p)
	defer cleanup()
	if err != nil {
		return err
	}
	settings := cli.New()
	settings.KubeConfig = k.kubeconfig
	settings.SetNamespace(j.namespace)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), j.namespace, "secret", func(string, ...interface{}) {}); err != nil {
		return err
	}
	_, histErr := action.NewHistory(cfg).Run(j.name)
	exists := histErr == nil
	if histErr != nil && !errors.Is(histErr, driver.ErrReleaseNotFound) {
		return histErr
	}
	if j.action == "delete" {
		if !exists {
			return nil
		}
		_, err := action.NewUninstall(cfg).Run(j.name)
		return err
	}
	path, err := k.archive(j.chart, j.version)
	if err != nil {
		return err
	}
	ch, err := loader.Load(path)
	if err != nil {
		return err
	}
	opts := values.Options{ValueFiles: j.valueFiles, Values: j.sets, StringValues: j.stringSets}
	vals, err := opts.MergeValues(getter.All(settings))
	if err != nil {
		return err
	}
	if err := k.addDependencies(ch, vals); err != nil {
		return err
	}
	if exists {
		up := action.NewUpgrade(cfg)
		up.Namespace, up.Timeout = j.namespace, j.timeout
		_, err = up.RunWithContext(ctx, j.name, ch, vals)
		return err
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace, in.Timeout = j.name, j.namespace, j.createNamespace, j.timeout
	_, err = in.RunWithContext(ctx, ch, vals)
	return err
}

// read gathers the Job's settings from the pod as `entry` finds them in its container.
func (k *klipper) read(ctx context.Context, p *corev1.Pod) (job, func(), error) {
	cleanup := func() {}
	if len(p.Spec.Containers) == 0 {
		return job{}, cleanup, errors.New("pod has no container")
	}
	c := p.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	j := job{name: env["NAME"], chart: env["CHART"], version: env["VERSION"], namespace: env["TARGET_NAMESPACE"], timeout: 5 * time.Minute}
	if j.namespace == "" {
		j.namespace = p.Namespace
	}
	if d, err := time.ParseDuration(env["TIMEOUT"]); err == nil {
		j.timeout = d
	}
	if len(c.Args) > 0 {
		j.action = c.Args[0]
	}
	for i := 1; i < len(c.Args); i++ {
		switch a := c.Args[i]; a {
		case "--create-namespace":
			j.createNamespace = true
		case "--namespace", "--version", "--set", "--set-string":
			if i+1 >= len(c.Args) {
				return j, cleanup, fmt.Errorf("%s without a value", a)
			}
			i++
			switch a {
			case "--set":
				j.sets = append(j.sets, c.Args[i])
			case "--set-string":
				j.stringSets = append(j.stringSets, c.Args[i])
			}
		}
	}
	files, cleanup, err := k.valueFiles(ctx, p)
	j.valueFiles = files
	return j, cleanup, err
}

// valueFiles writes the pod's "values" volume (the chart-values Secret's items) to a scratch
// folder; `entry` passes them to Helm in the order of their file names.
func (k *klipper) valueFiles(ctx context.Context, p *corev1.Pod) ([]string, func(), error) {
	cleanup := func() {}
	for _, v := range p.Spec.Volumes {
		if v.Name != "values" || v.Projected == nil {
			continue
		}
		dir, err := os.MkdirTemp("", "klipper-values-")
		if err != nil {
			return nil, cleanup, err
		}
		cleanup = func() { _ = os.RemoveAll(dir) }
		var files []string
		for _, src := range v.Projected.Sources {
			if src.Secret == nil {
				continue
			}
			s, err := k.client.CoreV1().Secrets(p.Namespace).Get(ctx, src.Secret.Name, metav1.GetOptions{})
			if err != nil {
				return nil, cleanup, err
			}
			for _, item := range src.Secret.Items {
				if !strings.HasSuffix(item.Path, ".yaml") {
					continue
				}
				path := filepath.Join(dir, item.Path)
				if err := os.WriteFile(path, s.Data[item.Key], 0o600); err != nil {
					return nil, cleanup, err
				}
				files = append(files, path)
			}
		}
		sort.Strings(files)
		return files, cleanup, nil
	}
	return nil, cleanup, nil
}

// archive finds the chart in the local folder, by the last element of CHART and the version.
func (k *klipper) archive(chart, version string) (string, error) {
	name := chart[strings.LastIndex(chart, "/")+1:]
	for _, v := range []string{version, "v" + strings.TrimPrefix(version, "v"), strings.TrimPrefix(version, "v")} {
		p := filepath.Join(k.charts, fmt.Sprintf("%s-%s.tgz", name, v))
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chart %q version %q: no %s-%s.tgz in %s (the suite installs only the charts it has)", chart, version, name, version, k.charts)
}

// report writes the container's end as the kubelet would.
func (k *klipper) report(ctx context.Context, p *corev1.Pod, runErr error) error {
	now := metav1.Now()
	image := ""
	if len(p.Spec.Containers) > 0 {
		image = p.Spec.Containers[0].Image
	}
	var status corev1.PodStatus
	if runErr == nil {
		delete(k.retryAt, p.UID)
		status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "helm", Image: image, RestartCount: k.tries[p.UID],
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now}},
		}}}
	} else {
		k.tries[p.UID]++
		backoff := time.Duration(10<<min(k.tries[p.UID]-1, 4)) * time.Second
		k.retryAt[p.UID] = time.Now().Add(backoff)
		fmt.Fprintf(os.Stderr, "%s/%s: %v (again in %s)\n", p.Namespace, p.Name, runErr, backoff)
		status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "helm", Image: image, RestartCount: k.tries[p.UID],
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting failed container"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 1, Reason: "Error", Message: runErr.Error(), StartedAt: now, FinishedAt: now}},
		}}}
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = k.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// addDependencies adds, from the --deps folder, each dependency the chart declares but does not
// carry, when its version satisfies the declared range. A dependency whose condition is false
// with these values (argo-cd's optional redis-ha) renders nothing, so one the folder lacks is
// left out instead of refused.
func (k *klipper) addDependencies(ch *chart.Chart, vals map[string]interface{}) error {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	final, err := chartutil.CoalesceValues(ch, vals)
	if err != nil {
		return err
	}
	for _, d := range ch.Metadata.Dependencies {
		if have[d.Name] {
			continue
		}
		if d.Condition != "" {
			if on, err := final.PathValue(d.Condition); err == nil && on == false {
				if _, err := os.Stat(filepath.Join(k.deps, d.Name)); err != nil {
					continue
				}
			}
		}
		if k.deps == "" {
			return fmt.Errorf("chart %s needs %s %s, which its archive does not carry", ch.Name(), d.Name, d.Version)
		}
		sub, err := loader.Load(filepath.Join(k.deps, d.Name))
		if err != nil {
			return fmt.Errorf("chart %s needs %s %s: %w", ch.Name(), d.Name, d.Version, err)
		}
		want, err := semver.NewConstraint(d.Version)
		if err != nil {
			return err
		}
		got, err := semver.NewVersion(sub.Metadata.Version)
		if err != nil || !want.Check(got) {
			return fmt.Errorf("chart %s needs %s %s, the folder has %s", ch.Name(), d.Name, d.Version, sub.Metadata.Version)
		}
		ch.AddDependency(sub)
	}
	return nil
}
