// Command karmada is Karmada's control plane of the test suite, one multi-call binary so that its
// programs share one build: `karmada aggregated-apiserver|controller-manager|scheduler|webhook|
// scheduler-estimator [flags]`. Each subcommand is upstream's own cobra command, as its
// cmd/<name>/main.go (or cmd/controller-manager/controller-manager.go) builds it at
// github.com/karmada-io/karmada v1.16.0 (the nearest release the Go module proxy serves to the
// example's versions.karmada 1.15.0; README, "The real control planes"); nothing here changes
// what they do. karmada-apiserver is not here: it is a kube-apiserver with Karmada's flags, our
// `kube apiserver` (tests/realkube/kube), which `kube karmada` starts with these (karmada.go there).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	controllerruntime "sigs.k8s.io/controller-runtime"

	aggregatedapiserver "github.com/karmada-io/karmada/cmd/aggregated-apiserver/app"
	controllermanager "github.com/karmada-io/karmada/cmd/controller-manager/app"
	estimator "github.com/karmada-io/karmada/cmd/scheduler-estimator/app"
	scheduler "github.com/karmada-io/karmada/cmd/scheduler/app"
	webhook "github.com/karmada-io/karmada/cmd/webhook/app"
)

func main() {
	commands := map[string]func(context.Context) *cobra.Command{
		"aggregated-apiserver": aggregatedapiserver.NewAggregatedApiserverCommand,
		"controller-manager":   controllermanager.NewControllerManagerCommand,
		"scheduler":            func(ctx context.Context) *cobra.Command { return scheduler.NewSchedulerCommand(ctx) },
		"webhook":              webhook.NewWebhookCommand,
		"scheduler-estimator":  estimator.NewSchedulerEstimatorCommand,
	}
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: karmada aggregated-apiserver|controller-manager|scheduler|webhook|scheduler-estimator [flags]")
		os.Exit(2)
	}
	ctx := controllerruntime.SetupSignalHandler()
	command := commands[os.Args[1]](ctx)
	command.SetArgs(os.Args[2:])
	code := cli.Run(command)
	logs.FlushLogs()
	os.Exit(code)
}
