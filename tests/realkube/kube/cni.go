package main

// The CNI stand-in of a site: Cilium's datapath cannot run here, but what a K3s cluster started
// with --flannel-backend=none shows before and after its CNI can. A Node the test registers with
// the annotation realkube.fabric.test/no-cni is NotReady (kwok leaves it so) with the
// node.kubernetes.io/not-ready taint, as the kubelet reports "cni plugin not initialized"; once
// Cilium's agent DaemonSet (kube-system/cilium, made by the cilium chart's helm install) exists,
// this removes the annotation, kwok makes the Node Ready and the real node lifecycle controller
// lifts the taint. Only an install Job that tolerates the taint (helm-controller's bootstrap
// Jobs) can install Cilium on such a cluster.

import (
	"context"
	"fmt"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

const noCNI = "realkube.fabric.test/no-cni"

var (
	nodesResource = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	daemonSets    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
)

func (s *site) runCNI(kubeconfig string) error {
	client, err := dynamicClient(kubeconfig)
	if err != nil {
		return err
	}
	log, err := s.openLog("cni")
	if err != nil {
		return err
	}
	go func() {
		for {
			if err := cniRound(context.Background(), client, log); err != nil {
				fmt.Fprintf(log, "%s %v\n", time.Now().Format(time.RFC3339), err)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	return nil
}

func cniRound(ctx context.Context, client dynamic.Interface, log *os.File) error {
	if _, err := client.Resource(daemonSets).Namespace("kube-system").Get(ctx, "cilium", metav1.GetOptions{}); err != nil {
		return nil // no CNI yet (or the API is away): nothing changes
	}
	nodes, err := client.Resource(nodesResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, noCNI))
	for _, n := range nodes.Items {
		if _, ok := n.GetAnnotations()[noCNI]; !ok {
			continue
		}
		if _, err := client.Resource(nodesResource).Patch(ctx, n.GetName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
		fmt.Fprintf(log, "%s %s: the CNI is installed (kube-system/cilium)\n", time.Now().Format(time.RFC3339), n.GetName())
	}
	return nil
}
