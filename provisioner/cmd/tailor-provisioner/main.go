// Command tailor-provisioner is Tailor's provisioner sidecar: it plans and launches capacity
// for pods the tailor-scheduler cannot place, and owns the lifecycle of the nodes it launches.
// `tailor-provisioner simulate` plans offline, from manifests and an EC2 catalog.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	// Mozilla's root certificates, for when the system has none: the image holds no CA bundle,
	// and the AWS SDK speaks TLS.
	_ "golang.org/x/crypto/x509roots/fallback"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
	ctrl "sigs.k8s.io/controller-runtime"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/tailor-autoscaler/tailor/provisioner/operator"
	"github.com/tailor-autoscaler/tailor/provisioner/simulate"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "simulate" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err := simulate.Run(ctx, os.Args[2:], os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "tailor-provisioner simulate:", err)
			os.Exit(1)
		}
		return
	}
	opts := operator.BindFlags(flag.CommandLine)
	klog.InitFlags(flag.CommandLine)
	if err := operator.ParseFlags(flag.CommandLine, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "tailor-provisioner:", err)
		os.Exit(2)
	}

	logger, err := newLogger(opts.LogFormat, opts.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tailor-provisioner:", err)
		os.Exit(2)
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	ctx := klog.NewContext(ctrl.SetupSignalHandler(), logger)
	cfg, err := ctrl.GetConfig()
	if err != nil {
		logger.Error(err, "loading kubeconfig")
		os.Exit(1)
	}
	if err := operator.Run(ctx, cfg, *opts); err != nil {
		logger.Error(err, "provisioner stopped")
		os.Exit(1)
	}
}

// newLogger returns the logger of the format asked for, at klog's -v verbosity or that of
// Karpenter's log level when one is given.
func newLogger(format string, level operator.LogLevel) (logr.Logger, error) {
	verbosity, err := strconv.Atoi(flag.Lookup("v").Value.String())
	if err != nil {
		return logr.Logger{}, fmt.Errorf("-v: %w", err)
	}
	switch level {
	case operator.LogDebug:
		verbosity = operator.DebugVerbosity
	case operator.LogInfo:
		verbosity = 0
	}
	var logger logr.Logger
	switch format {
	case "text":
		logger = textlogger.NewLogger(textlogger.NewConfig(textlogger.Verbosity(verbosity)))
	case "json":
		logger = crzap.New(crzap.Level(zapcore.Level(-verbosity)))
	default:
		return logr.Logger{}, fmt.Errorf("--log-format %q: use text or json", format)
	}
	if level == operator.LogError {
		logger = logr.New(errorsOnly{logger.GetSink()})
	}
	return logger, nil
}

// errorsOnly drops every message but errors, for Karpenter's log level error.
type errorsOnly struct{ logr.LogSink }

func (errorsOnly) Enabled(int) bool { return false }

func (errorsOnly) Info(int, string, ...any) {}

func (s errorsOnly) WithValues(kv ...any) logr.LogSink {
	return errorsOnly{s.LogSink.WithValues(kv...)}
}

func (s errorsOnly) WithName(name string) logr.LogSink { return errorsOnly{s.LogSink.WithName(name)} }
