// Package localaws serves a local stand-in for the parts of AWS that Tailor calls (EC2, SSM
// Parameter Store and the Price List API). It speaks the wire protocols that the unmodified
// aws-sdk-go-v2 uses, so the demo and the tests run the real clients without an AWS account.
//
// Every service is served by one http.Handler: EC2 Query requests are recognised by their form
// field Action, AWS JSON 1.1 requests by their X-Amz-Target header, EKS REST-JSON requests by
// their /clusters/ path, and /_admin/ holds a small JSON API for tests and the demo. Instance types, zone offerings and prices come from the
// catalog embedded in provisioner/cloudprovider/aws/catalog. When a Kubernetes client is
// given, running instances register Nodes the way a kubelet and the cloud controller manager
// would.
package localaws

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/catalog"
	"github.com/tailor-autoscaler/tailor/provisioner/cloudprovider/aws/nodecost"
)

const (
	// DefaultClusterName is the cluster the seeded subnets and security group are tagged for.
	DefaultClusterName = "tailor-local"
	// DefaultBootDelay is how long a running instance takes to register its Node.
	DefaultBootDelay = time.Second
	// DefaultShutdownDelay is how long a terminating instance stays shutting-down.
	DefaultShutdownDelay = 2 * time.Second
	// DefaultSyncPeriod is how often Run registers and deletes Nodes.
	DefaultSyncPeriod = 200 * time.Millisecond

	// terminatedRetention is how long a terminated instance stays visible, as in EC2.
	terminatedRetention = time.Hour
	// accountID owns every seeded resource.
	accountID = "123456789012"
	// maxRequestBytes bounds a request body; the largest real requests are a few hundred KiB.
	maxRequestBytes = 8 << 20
)

// DefaultKubernetesVersion is the minor of the Kubernetes modules the server is built from
// (component-base v0.35.x says 1.35), so that the local endpoint moves with the module graph.
const DefaultKubernetesVersion = version.DefaultKubeBinaryVersion

// kubernetesMinor matches a Kubernetes minor as EKS writes it.
var kubernetesMinor = regexp.MustCompile(`^1\.[0-9]+$`)

// clusterNamePattern is the EKS rule for cluster names.
var clusterNamePattern = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$`)

// Options configures a Server.
type Options struct {
	// ClusterName is used in the discovery tags and names of the seeded network resources.
	// Empty means DefaultClusterName.
	ClusterName string
	// SubnetsPerZone is how many private subnets are seeded in each zone; 0 means one.
	SubnetsPerZone int
	// Clock drives every state transition. Nil means the real clock.
	Clock clock.Clock
	// LaunchDelay is how long an instance stays pending before it is running.
	LaunchDelay time.Duration
	// BootDelay is how long a running instance takes to register its Node. The command's
	// default is DefaultBootDelay.
	BootDelay time.Duration
	// ShutdownDelay is how long a terminating instance stays shutting-down before it is
	// terminated. The command's default is DefaultShutdownDelay.
	ShutdownDelay time.Duration
	// SyncPeriod is how often Run registers and deletes Nodes. Zero means DefaultSyncPeriod.
	SyncPeriod time.Duration
	// KubeClient, when set, is used to register a Node for every running instance and to
	// delete it when the instance is terminated. Nil disables node registration.
	KubeClient kubernetes.Interface
	// Logger receives the server's logs. The zero value means klog's background logger.
	Logger logr.Logger
	// SQS configures the SQS queues and the interruption events injected into them.
	SQS SQSOptions
	// EKS is what DescribeCluster answers for the cluster.
	EKS EKSCluster
	// KubernetesVersion is the minor the cluster runs (1.35): the version DescribeCluster
	// answers, the kubelet's, and the release the seeded EKS AMIs and SSM parameters are
	// for. Empty means DefaultKubernetesVersion.
	KubernetesVersion string
}

// Server is the local AWS endpoint. It is safe for concurrent use.
type Server struct {
	clusterName   string
	region        string
	clock         clock.Clock
	launchDelay   time.Duration
	bootDelay     time.Duration
	shutdownDelay time.Duration
	syncPeriod    time.Duration
	logger        logr.Logger
	nodes         nodeClient
	sqs           *sqsService
	eks           EKSCluster
	// kubernetes is the minor the cluster runs (Options.KubernetesVersion).
	kubernetes string
	startedAt  time.Time

	// catalog data and seeded resources; never changed after New.
	instanceTypes  []catalog.InstanceType
	typesByName    map[string]*catalog.InstanceType
	zones          []zone
	vpc            vpc
	subnets        []*subnet
	securityGroups []*securityGroup
	images         []*image
	parameters     map[string]*parameter
	products       []product

	// requests counts API requests, for request ids.
	requests atomic.Uint64

	// mu guards the fields below and the address counters of the subnets.
	mu              sync.Mutex
	sequence        uint64
	launchTemplates []*launchTemplate
	instances       []*instance
	fleets          map[string]*fleetRecord
	insufficient    map[CapacityPool]bool
	reservations    []*capacityReservation
	// launched counts the instances CreateFleet launched since the server started.
	launched int

	// faults are injected at run time through the admin API; they have their own lock.
	faults faultState

	// instanceProfiles are keyed by lower-case name, as IAM names are unique regardless of case.
	instanceProfiles map[string]*iamInstanceProfile
}

// New validates the options, loads the catalog and seeds the network, images and parameters.
func New(opts Options) (*Server, error) {
	if opts.ClusterName == "" {
		opts.ClusterName = DefaultClusterName
	}
	if !clusterNamePattern.MatchString(opts.ClusterName) {
		return nil, fmt.Errorf("cluster name %q must be 1-100 letters, digits, '-' or '_', starting with a letter or digit", opts.ClusterName)
	}
	for _, d := range []struct {
		name  string
		value time.Duration
	}{
		{"launch delay", opts.LaunchDelay},
		{"boot delay", opts.BootDelay},
		{"shutdown delay", opts.ShutdownDelay},
		{"sync period", opts.SyncPeriod},
	} {
		if d.value < 0 {
			return nil, fmt.Errorf("%s must not be negative, got %s", d.name, d.value)
		}
	}
	if err := opts.EKS.validate(); err != nil {
		return nil, err
	}
	if opts.KubernetesVersion == "" {
		opts.KubernetesVersion = DefaultKubernetesVersion
	}
	if !kubernetesMinor.MatchString(opts.KubernetesVersion) {
		return nil, fmt.Errorf("kubernetes version %q must be a minor such as 1.35", opts.KubernetesVersion)
	}
	for _, q := range opts.SQS.Queues {
		if !queueNamePattern.MatchString(q) {
			return nil, fmt.Errorf("queue name %q must be 1-80 letters, digits, '-' or '_'", q)
		}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.SyncPeriod == 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = klog.Background()
	}
	cat, err := catalog.Embedded()
	if err != nil {
		return nil, fmt.Errorf("loading instance catalog: %w", err)
	}
	if len(cat.Zones) == 0 || len(cat.InstanceTypes) == 0 {
		return nil, errors.New("instance catalog has no zones or no instance types")
	}
	s := &Server{
		clusterName:   opts.ClusterName,
		region:        cat.Region,
		clock:         opts.Clock,
		launchDelay:   opts.LaunchDelay,
		bootDelay:     opts.BootDelay,
		shutdownDelay: opts.ShutdownDelay,
		syncPeriod:    opts.SyncPeriod,
		eks:           opts.EKS,
		kubernetes:    opts.KubernetesVersion,
		logger:        opts.Logger.WithName("localaws"),
		startedAt:     opts.Clock.Now().UTC(),
		instanceTypes: cat.InstanceTypes,
		typesByName:   make(map[string]*catalog.InstanceType, len(cat.InstanceTypes)),
		parameters:    map[string]*parameter{},
		fleets:        map[string]*fleetRecord{},
		insufficient:  map[CapacityPool]bool{},

		instanceProfiles: map[string]*iamInstanceProfile{},
	}
	if opts.KubeClient != nil {
		s.nodes = opts.KubeClient.CoreV1().Nodes()
	}
	s.sqs = newSQSService(opts.SQS, s.clock, s.logger)
	sort.Slice(s.instanceTypes, func(i, j int) bool { return s.instanceTypes[i].Name < s.instanceTypes[j].Name })
	for i := range s.instanceTypes {
		s.typesByName[s.instanceTypes[i].Name] = &s.instanceTypes[i]
	}
	s.seedNetwork(cat.Zones, max(1, opts.SubnetsPerZone))
	s.seedImages()
	costs, err := nodecost.Embedded()
	if err != nil {
		return nil, fmt.Errorf("loading node cost table: %w", err)
	}
	s.products = append(s.buildProducts(), s.nodeCostProducts(costs)...)
	return s, nil
}

// ServeHTTP dispatches a request to the admin API, EKS (REST-JSON, by path), an AWS JSON 1.1
// service, IAM or EC2.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxRequestBytes)
	switch {
	case strings.HasPrefix(r.URL.Path, adminPrefix):
		s.serveAdmin(w, r)
	case isEKSRequest(r):
		s.serveEKS(w, r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS."):
		s.serveSQS(w, r)
	case r.Header.Get("X-Amz-Target") != "":
		s.serveJSON(w, r)
	case r.Method == http.MethodPost || r.Method == http.MethodGet:
		s.serveQuery(w, r)
	default:
		http.Error(w, "unsupported request", http.StatusMethodNotAllowed)
	}
}

// Run registers and deletes Nodes and forgets long-terminated instances, every sync period,
// until the context is done. Instance states themselves follow the clock without it.
func (s *Server) Run(ctx context.Context) {
	if _, err := logr.FromContext(ctx); err != nil {
		ctx = klog.NewContext(ctx, s.logger)
	}
	for {
		s.sync(ctx)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(s.syncPeriod):
		}
	}
}

// sync runs one round of the time-driven work.
func (s *Server) sync(ctx context.Context) {
	s.syncNodes(ctx)
	s.forgetTerminated()
}

// nextSequence returns a number unique within this server, for resource ids.
// s.mu must be held.
func (s *Server) nextSequence() uint64 {
	s.sequence++
	return s.sequence
}
