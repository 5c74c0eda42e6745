package scheduler

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	componentversion "k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

// builtMinor is the Kubernetes minor tailor-scheduler is built from: its kube-scheduler.
var builtMinor = version.MustParseGeneric(componentversion.DefaultKubeBinaryVersion)

// skew says how the API server's version stands against the scheduler's, by upstream's
// version-skew policy: kube-scheduler may be as new as the API server or one minor older.
// It returns an error when the API server is older, and a note when it is more than one
// minor newer (Tailor tests such servers; upstream does not support them).
func skew(server *version.Version) (note string, err error) {
	switch {
	case server.Major() != builtMinor.Major() || server.Minor() < builtMinor.Minor():
		return "", fmt.Errorf("the API server runs Kubernetes %s, older than tailor-scheduler's %s: kube-scheduler may not be newer than the API server (it watches APIs older servers lack); upgrade the cluster or run a Tailor built on %d.%d",
			server, builtMinor, server.Major(), server.Minor())
	case server.Minor() > builtMinor.Minor()+1:
		return fmt.Sprintf("the API server runs Kubernetes %s, %d minors newer than tailor-scheduler's %s: beyond upstream's version-skew policy for kube-scheduler (one minor), within the versions Tailor tests", server, server.Minor()-builtMinor.Minor(), builtMinor), nil
	}
	return "", nil
}

// checkSkew reads the API server's version and logs, once, how it stands against the
// scheduler's (see skew). The scheduler runs on either way: the error says what to fix.
func checkSkew(ctx context.Context, client discovery.ServerVersionInterface) {
	logger := klog.FromContext(ctx)
	info, err := client.ServerVersion()
	if err != nil {
		logger.Error(err, "reading the API server's version to check it against tailor-scheduler's", "scheduler", builtMinor.String())
		return
	}
	server, err := version.ParseGeneric(info.GitVersion)
	if err != nil {
		logger.Error(err, "parsing the API server's version", "apiServer", info.GitVersion, "scheduler", builtMinor.String())
		return
	}
	note, err := skew(server)
	switch {
	case err != nil:
		logger.Error(err, "version skew not supported", "apiServer", info.GitVersion, "scheduler", builtMinor.String())
	case note != "":
		logger.Info("version skew beyond upstream's policy", "apiServer", info.GitVersion, "scheduler", builtMinor.String(), "note", note)
	default:
		logger.V(2).Info("version skew supported", "apiServer", info.GitVersion, "scheduler", builtMinor.String())
	}
}
