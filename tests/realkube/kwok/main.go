// Command kwok is the suite's nodes and kubelets: sigs.k8s.io/kwok keeps the Nodes the topology
// names Ready with the capacity and allocatable they are given (GPUs included) and moves Pods
// through their lifecycle by its stages, with no container run. The flags and config are
// upstream's own, set up as kwok's cmd/kwok/main.go sets them up at v0.7.0.
//
// One change to what kwok does by default: the pods of K3s's helm-install Jobs (labelled
// helmcharts.helm.cattle.io/chart by helm-controller) are not made Running and Succeeded by
// kwok's stages, because the suite's klipper stand-in (tests/realkube/helm) runs the real Helm
// install for them and writes their end itself. kwok's default pod stages (its embedded
// kustomize/stage/pod/fast) are given to it as its config with that selector added, and with one
// more: a pod a test labels realkube.fabric.test/hold is not ended (it keeps its Job running).
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/config"
	"sigs.k8s.io/kwok/pkg/kwok/cmd"
	"sigs.k8s.io/kwok/pkg/log"
	"sigs.k8s.io/kwok/pkg/utils/signals"
)

// notHelmInstall is the selector requirement added to the stages that run a pod.
const notHelmInstall = "    - key: '.metadata.labels[\"helmcharts.helm.cattle.io/chart\"]'\n      operator: 'DoesNotExist'\n"

// notHeld is added to the stage that ends a Job's pod: a test's pod labelled
// realkube.fabric.test/hold keeps running (a Job holding its GPUs until the test deletes it).
const notHeld = "    - key: '.metadata.labels[\"realkube.fabric.test/hold\"]'\n      operator: 'DoesNotExist'\n"

// withoutCNI is added to the stage that makes a Node Ready: a Node annotated
// realkube.fabric.test/no-cni stays as registered (NotReady, tainted not-ready) until the site's
// CNI stand-in sees the CNI installed and removes the annotation, as a K3s node started with
// --flannel-backend=none stays NotReady until a CNI writes its config (tests/realkube/kube/cni.go).
const withoutCNI = "    - key: '.metadata.annotations[\"realkube.fabric.test/no-cni\"]'\n      operator: 'DoesNotExist'\n"

// stagesFile writes kwok's default pod stages, with helm-install pods left out of the ones that
// make a pod Running and Succeeded, and returns its path.
func stagesFile() (string, error) {
	var docs []string
	for _, st := range []struct{ yaml, extra string }{
		{podfast.DefaultPodReady, notHelmInstall},
		{podfast.DefaultPodComplete, notHelmInstall + notHeld},
		{nodefast.DefaultNodeInit, withoutCNI},
	} {
		if !strings.Contains(st.yaml, "    matchExpressions:\n") {
			return "", fmt.Errorf("kwok's default stage has no matchExpressions: %.60q", st.yaml)
		}
		docs = append(docs, strings.Replace(st.yaml, "    matchExpressions:\n", "    matchExpressions:\n"+st.extra, 1))
	}
	// The rest as kwok has them (with --node-lease-duration-seconds set, kwok's own choice is
	// the heartbeat without lease: pkg/kwok/cmd/root.go getDefaultNodeStages).
	docs = append(docs, podfast.DefaultPodDelete, nodeheartbeat.DefaultNodeHeartbeat)
	// In the working folder (the site's, where `kube site` starts kwok).
	path, err := filepath.Abs("kwok-stages.yaml")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o644)
}

func main() {
	stages, err := stagesFile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kwok stages:", err)
		os.Exit(1)
	}
	os.Args = append(os.Args, "--config="+stages)
	flagset := pflag.NewFlagSet("global", pflag.ContinueOnError)
	flagset.ParseErrorsWhitelist.UnknownFlags = true
	flagset.Usage = func() {}

	ctx := signals.SetupSignalContext()
	ctx, logger := log.InitFlags(ctx, flagset)
	ctx, err = config.InitFlags(ctx, flagset)
	if err != nil {
		_, _ = os.Stderr.Write([]byte(flagset.FlagUsages()))
		logger.Error("Init config flags", err)
		os.Exit(1)
	}
	command := cmd.NewCommand(ctx)
	command.PersistentFlags().AddFlagSet(flagset)
	if err := command.ExecuteContext(ctx); err != nil {
		logger.Error("Execute exit", err)
		os.Exit(1)
	}
}
