// Command tailor-local-aws serves a local stand-in for the AWS APIs Tailor calls, for the demo
// and end-to-end tests. Point the AWS SDK at it with AWS_ENDPOINT_URL and any static
// credentials; with --kubeconfig, running instances register Nodes in that cluster. EKS
// DescribeCluster reports --cluster-endpoint, --cluster-ca-file and --service-cidr.
package main

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/tailor-autoscaler/tailor/test/localaws"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "Address to serve on; port 0 picks a free port.")
	addressFile := flag.String("address-file", "", "If set, write the served URL to this file once listening.")
	clusterName := flag.String("cluster-name", localaws.DefaultClusterName, "Cluster the seeded subnets and security group are tagged for.")
	kubeconfig := flag.String("kubeconfig", "", "Kubeconfig of the cluster to register Nodes in; empty disables node registration.")
	launchDelay := flag.Duration("launch-delay", 0, "How long instances stay pending before running.")
	bootDelay := flag.Duration("boot-delay", localaws.DefaultBootDelay, "How long a running instance takes to register its Node.")
	shutdownDelay := flag.Duration("shutdown-delay", localaws.DefaultShutdownDelay, "How long a terminating instance stays shutting-down.")
	clusterEndpoint := flag.String("cluster-endpoint", "", "API server URL that EKS DescribeCluster reports for the cluster.")
	clusterCAFile := flag.String("cluster-ca-file", "", "PEM file of the cluster CA that EKS DescribeCluster reports (base64-encoded, as EKS does).")
	serviceCIDR := flag.String("service-cidr", localaws.DefaultServiceCIDR, "Service IPv4 CIDR that EKS DescribeCluster reports.")
	klog.InitFlags(nil)
	spotReclaimDelay := flag.Duration("spot-reclaim-delay", localaws.DefaultSpotReclaimDelay, "How long after an injected spot interruption warning the instance is terminated.")
	kubernetesVersion := flag.String("kubernetes-version", localaws.DefaultKubernetesVersion, "Kubernetes minor the cluster runs (1.35): what EKS DescribeCluster answers, the kubelet's version, the release the seeded EKS AMIs and SSM parameters are for.")
	queues := flag.String("queues", "", "Comma-separated names of SQS queues to create at start, e.g. an interruption queue.")
	flag.Parse()

	logger := klog.Background()
	eks := localaws.EKSCluster{Endpoint: *clusterEndpoint, ServiceIPv4CIDR: *serviceCIDR}
	if *clusterCAFile != "" {
		pem, err := os.ReadFile(*clusterCAFile)
		if err != nil {
			logger.Error(err, "reading --cluster-ca-file")
			os.Exit(1)
		}
		eks.CertificateAuthority = base64.StdEncoding.EncodeToString(pem)
	}
	ctx, stop := signal.NotifyContext(klog.NewContext(context.Background(), logger), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *listen, *addressFile, *kubeconfig, localaws.Options{
		ClusterName:       *clusterName,
		LaunchDelay:       *launchDelay,
		BootDelay:         *bootDelay,
		ShutdownDelay:     *shutdownDelay,
		Logger:            logger,
		EKS:               eks,
		SQS:               localaws.SQSOptions{SpotReclaimDelay: *spotReclaimDelay, Queues: splitList(*queues)},
		KubernetesVersion: *kubernetesVersion,
	})
	stop()
	if err != nil {
		logger.Error(err, "tailor-local-aws failed")
		os.Exit(1)
	}
}

// run serves until the context is done.
func run(ctx context.Context, listen, addressFile, kubeconfig string, opts localaws.Options) error {
	if kubeconfig != "" {
		config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return fmt.Errorf("loading kubeconfig: %w", err)
		}
		if opts.KubeClient, err = kubernetes.NewForConfig(config); err != nil {
			return fmt.Errorf("creating Kubernetes client: %w", err)
		}
	}
	server, err := localaws.New(opts)
	if err != nil {
		return fmt.Errorf("creating server: %w", err)
	}
	listener, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listening: %w", err)
	}
	url := "http://" + listener.Addr().String()
	fmt.Printf("listening on %s\n", url)
	if addressFile != "" {
		if err := writeAtomically(addressFile, url+"\n"); err != nil {
			_ = listener.Close()
			return fmt.Errorf("writing address file: %w", err)
		}
	}

	httpServer := &http.Server{Handler: server, ReadHeaderTimeout: 10 * time.Second}
	go server.Run(klog.NewContext(ctx, opts.Logger))
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = httpServer.Shutdown(shutdownCtx)
	}()
	if err := httpServer.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

// writeAtomically writes the file through a rename, so that a reader polling for it never sees
// it half written.
func writeAtomically(path, content string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// splitList splits a comma-separated flag; empty gives none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
