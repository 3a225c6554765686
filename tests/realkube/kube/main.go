// Command kube is the real Kubernetes control plane of the test suite, one multi-call binary so
// that the four programs share one build: `kube apiserver|controller-manager|scheduler|kubectl
// [flags]`; `kube site` starts one site's control plane of them (site.go), and `kube karmada`
// Karmada's control plane of them and of the karmada binary (karmada.go, tests/realkube/karmada).
// Each subcommand is upstream's own cobra command, as its cmd/<name>/main.go builds it at
// k8s.io/kubernetes v1.33.5 (the minor K3s v1.33 embeds); nothing here changes what they do.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	commands := map[string]func() *cobra.Command{
		"apiserver":          apiserver.NewAPIServerCommand,
		"controller-manager": controllermanager.NewControllerManagerCommand,
		"scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
		"kubectl":            kubectl.NewDefaultKubectlCommand,
	}
	if len(os.Args) >= 2 && os.Args[1] == "site" {
		os.Exit(runSite(os.Args[2:]))
	}
	if len(os.Args) >= 2 && os.Args[1] == "karmada" {
		os.Exit(runKarmada(os.Args[2:]))
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: kube apiserver|controller-manager|scheduler|kubectl|site|karmada [flags]")
		os.Exit(2)
	}
	name := os.Args[1]
	command := commands[name]()
	command.SetArgs(os.Args[2:])
	if name == "kubectl" {
		// kubectl prints its own errors (k8s.io/kubernetes cmd/kubectl/kubectl.go).
		if err := cli.RunNoErrOutput(command); err != nil {
			cmdutil.CheckErr(err)
		}
		os.Exit(0)
	}
	os.Exit(cli.Run(command))
}
