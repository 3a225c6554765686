// Command kine is K3s's datastore, kine with SQLite (what a single K3s server runs), run beside
// the suite's kube-apiserver as an etcd endpoint. It is upstream's own command line
// (github.com/k3s-io/kine pkg/app, as its main.go runs it); nothing here changes what it does.
package main

import (
	"context"
	"errors"
	"os"

	"github.com/k3s-io/kine/pkg/app"
	"github.com/sirupsen/logrus"
)

func main() {
	if err := app.New().Run(os.Args); err != nil && !errors.Is(err, context.Canceled) {
		logrus.Fatal(err)
	}
}
