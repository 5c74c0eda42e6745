package v1

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass is the AWS-specific part of a node: where it runs (subnets, security
// groups), what it boots (AMI, user data), and how the kubelet is configured.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec EC2NodeClassSpec `json:"spec"`
	// +optional
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassSpec is the desired configuration of the nodes of this class.
//
// +kubebuilder:validation:XValidation:message="set exactly one of role or instanceProfile",rule="(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="switching between role and instanceProfile is not supported: create a new EC2NodeClass instead",rule="(has(oldSelf.role) && has(self.role)) || (has(oldSelf.instanceProfile) && has(self.instanceProfile))"
// +kubebuilder:validation:XValidation:message="amiFamily is required when amiSelectorTerms has no alias: set amiFamily (AL2023, AL2, Bottlerocket, Windows2019, Windows2022 or Custom)",rule="self.amiSelectorTerms.exists(x, has(x.alias)) || has(self.amiFamily)"
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms select the subnets nodes may launch in; terms are ORed.
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms needs at least one term",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="each subnet selector term needs tags or id",rule="self.all(x, has(x.tags) || has(x.id))"
	// +kubebuilder:validation:XValidation:message="a subnet selector term with id cannot also have tags: split it into two terms",rule="!self.all(x, has(x.id) && has(x.tags))"
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`
	// SecurityGroupSelectorTerms select the security groups attached to nodes; terms are ORed.
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms needs at least one term",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="each security group selector term needs tags, id or name",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name))"
	// +kubebuilder:validation:XValidation:message="a security group selector term with id cannot also have tags or name: split it",rule="!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))"
	// +kubebuilder:validation:XValidation:message="a security group selector term with name cannot also have tags or id: split it",rule="!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))"
	// +kubebuilder:validation:MaxItems:=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`
	// CapacityReservationSelectorTerms select the EC2 capacity reservations (on-demand
	// capacity reservations and capacity blocks) nodes of this class may use; terms are ORed.
	// Active reservations they select are listed in status.capacityReservations.
	// +kubebuilder:validation:XValidation:message="each capacity reservation selector term needs id or tags",rule="self.all(x, has(x.id) || has(x.tags))"
	// +kubebuilder:validation:XValidation:message="a capacity reservation selector term with id cannot also have tags or ownerID: split it into two terms",rule="self.all(x, !has(x.id) || (!has(x.tags) && !has(x.ownerID)))"
	// +kubebuilder:validation:MaxItems:=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`
	// AMISelectorTerms select the AMI nodes boot; terms are ORed and the newest match per
	// architecture wins. An alias ("al2023@latest") may not be combined with other terms.
	// +kubebuilder:validation:XValidation:message="each AMI selector term needs one of alias, id, name, tags or ssmParameter",rule="self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="an AMI selector term with id cannot also have alias, tags, name or owner",rule="!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="an AMI selector term with alias cannot also have id, tags, name or owner",rule="!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))"
	// +kubebuilder:validation:XValidation:message="an alias must be the only AMI selector term",rule="!(self.exists(x, has(x.alias)) && self.size() != 1)"
	// +kubebuilder:validation:MinItems:=1
	// +kubebuilder:validation:MaxItems:=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`
	// AMIFamily selects the bootstrap format (AL2, AL2023, Bottlerocket, Windows2019,
	// Windows2022 or Custom). It is inferred from an alias term and required otherwise.
	// Windows families launch amd64 Windows Server nodes, bootstrapped by PowerShell.
	// +kubebuilder:validation:Enum:={AL2,AL2023,Bottlerocket,Windows2019,Windows2022,Custom}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`
	// UserData is merged with the bootstrap Tailor generates for the AMI family.
	// +optional
	UserData *string `json:"userData,omitempty"`
	// Role is the IAM role of the nodes; Tailor creates an instance profile for it.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="role must not be empty"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="role cannot change: create a new EC2NodeClass instead"
	// +optional
	Role string `json:"role,omitempty"`
	// InstanceProfile is an existing instance profile for the nodes, instead of Role.
	// +kubebuilder:validation:XValidation:rule="self != ''",message="instanceProfile must not be empty"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`
	// Tags added to every instance, volume and launch template. Keys Tailor uses for
	// ownership are refused.
	// +kubebuilder:validation:XValidation:message="tag keys must not be empty",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag key eks:eks-cluster-name is set by Tailor: remove it",rule="self.all(k, k !='eks:eks-cluster-name')"
	// +kubebuilder:validation:XValidation:message="tag keys starting with kubernetes.io/cluster are set by Tailor: remove them",rule="self.all(k, !k.startsWith('kubernetes.io/cluster') )"
	// +kubebuilder:validation:XValidation:message="tag key karpenter.sh/nodepool is set by Tailor: remove it",rule="self.all(k, k != 'karpenter.sh/nodepool')"
	// +kubebuilder:validation:XValidation:message="tag key karpenter.sh/nodeclaim is set by Tailor: remove it",rule="self.all(k, k !='karpenter.sh/nodeclaim')"
	// +kubebuilder:validation:XValidation:message="tag key karpenter.k8s.aws/ec2nodeclass is set by Tailor: remove it",rule="self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')"
	// +kubebuilder:validation:MaxProperties:=50
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// Kubelet overrides parts of the kubelet configuration of the nodes.
	// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="has(self.imageGCHighThresholdPercent) && has(self.imageGCLowThresholdPercent) ?  self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent  : true"
	// +kubebuilder:validation:XValidation:message="every evictionSoft key needs the same key in evictionSoftGracePeriod",rule="has(self.evictionSoft) ? self.evictionSoft.all(e, (e in self.evictionSoftGracePeriod)):true"
	// +kubebuilder:validation:XValidation:message="every evictionSoftGracePeriod key needs the same key in evictionSoft",rule="has(self.evictionSoftGracePeriod) ? self.evictionSoftGracePeriod.all(e, (e in self.evictionSoft)):true"
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`
	// BlockDeviceMappings are the volumes attached to each instance.
	// +kubebuilder:validation:XValidation:message="at most one block device mapping may set rootVolume",rule="self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1"
	// +kubebuilder:validation:MaxItems:=50
	// +optional
	BlockDeviceMappings []*BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	// InstanceStorePolicy RAID0 puts the instance's local NVMe disks in one array used for
	// ephemeral storage.
	// +kubebuilder:validation:Enum:={RAID0}
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`
	// DetailedMonitoring turns on one-minute CloudWatch metrics for instances.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`
	// AssociatePublicIPAddress overrides the subnet's public IP setting.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`
	// MetadataOptions configure the instance metadata service. The default requires IMDSv2
	// with a hop limit of 1, so pods cannot reach the node's credentials.
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`
	// Context is passed to CreateFleet for capacity reservations in other accounts.
	// +optional
	Context *string `json:"context,omitempty"`
}

// SubnetSelectorTerm selects subnets by tags (all must match) or by id.
type SubnetSelectorTerm struct {
	// Tags to match; "*" as a value matches any value.
	// +kubebuilder:validation:XValidation:message="selector tags need non-empty keys and values (use \"*\" to match any value)",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is the subnet id.
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, id or name.
type SecurityGroupSelectorTerm struct {
	// Tags to match; "*" as a value matches any value.
	// +kubebuilder:validation:XValidation:message="selector tags need non-empty keys and values (use \"*\" to match any value)",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is the security group id.
	// +kubebuilder:validation:Pattern:="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name is the security group name.
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations by id, or by tags (all
// must match) and optionally the account that owns them.
type CapacityReservationSelectorTerm struct {
	// Tags to match; "*" as a value matches any value.
	// +kubebuilder:validation:XValidation:message="selector tags need non-empty keys and values (use \"*\" to match any value)",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is the capacity reservation id (cr-...).
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
	// OwnerID is the 12-digit account that owns the reservation (one shared with this
	// account, say); only with tags.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +optional
	OwnerID string `json:"ownerID,omitempty"`
}

// AMISelectorTerm selects AMIs by alias, id, name (and owner), tags or an SSM parameter.
type AMISelectorTerm struct {
	// Alias is family@version: al2023@latest, al2@latest, bottlerocket@latest or a pinned
	// version of them, or windows2019@latest or windows2022@latest (EKS publishes only the
	// latest Windows AMIs).
	// +kubebuilder:validation:XValidation:message="alias must look like family@version, for example al2023@latest",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="alias family must be al2023, al2, bottlerocket, windows2019 or windows2022",rule="self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022']"
	// +kubebuilder:validation:XValidation:message="a Windows alias takes only the version latest (EKS publishes no pinned Windows releases): write windows2019@latest or windows2022@latest",rule="!self.startsWith('windows') || self.endsWith('@latest')"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`
	// Tags to match; "*" as a value matches any value.
	// +kubebuilder:validation:XValidation:message="selector tags need non-empty keys and values (use \"*\" to match any value)",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties:=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// ID is the AMI id.
	// +kubebuilder:validation:Pattern:="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
	// Name of the AMI; wildcards are allowed.
	// +optional
	Name string `json:"name,omitempty"`
	// Owner account id or alias (self, amazon) of the AMI.
	// +optional
	Owner string `json:"owner,omitempty"`
	// SSMParameter names a parameter whose value is an AMI id.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}

// KubeletConfiguration is the subset of kubelet settings an EC2NodeClass may set. They
// change a node's allocatable resources and pod count, so the planner reads them too.
type KubeletConfiguration struct {
	// ClusterDNS is the list of DNS server IPs for pods.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`
	// MaxPods overrides the per-instance-type pod limit.
	// +kubebuilder:validation:Minimum:=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`
	// PodsPerCore caps pods at this many per vCPU (the lower of this and MaxPods applies).
	// +kubebuilder:validation:Minimum:=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`
	// SystemReserved resources for OS daemons.
	// +kubebuilder:validation:XValidation:message="systemReserved keys must be cpu, memory, ephemeral-storage or pid",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="systemReserved values must not be negative",rule="self.all(x, !self[x].startsWith('-'))"
	// +kubebuilder:validation:MaxProperties:=10
	// +optional
	SystemReserved map[string]string `json:"systemReserved,omitempty"`
	// KubeReserved resources for Kubernetes daemons; defaults follow the EKS formula.
	// +kubebuilder:validation:XValidation:message="kubeReserved keys must be cpu, memory, ephemeral-storage or pid",rule="self.all(x, x=='cpu' || x=='memory' || x=='ephemeral-storage' || x=='pid')"
	// +kubebuilder:validation:XValidation:message="kubeReserved values must not be negative",rule="self.all(x, !self[x].startsWith('-'))"
	// +kubebuilder:validation:MaxProperties:=10
	// +optional
	KubeReserved map[string]string `json:"kubeReserved,omitempty"`
	// EvictionHard thresholds; memory.available defaults to 100Mi.
	// +kubebuilder:validation:XValidation:message="evictionHard keys must be memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree or pid.available",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:MaxProperties:=10
	// +optional
	EvictionHard map[string]string `json:"evictionHard,omitempty"`
	// EvictionSoft thresholds; each needs an evictionSoftGracePeriod.
	// +kubebuilder:validation:XValidation:message="evictionSoft keys must be memory.available, nodefs.available, nodefs.inodesFree, imagefs.available, imagefs.inodesFree or pid.available",rule="self.all(x, x in ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available'])"
	// +kubebuilder:validation:MaxProperties:=10
	// +optional
	EvictionSoft map[string]string `json:"evictionSoft,omitempty"`
	// EvictionSoftGracePeriod per soft threshold.
	// +kubebuilder:validation:MaxProperties:=10
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`
	// EvictionMaxPodGracePeriod caps pod grace periods on soft eviction, in seconds.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`
	// ImageGCHighThresholdPercent is the disk usage that triggers image garbage collection.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`
	// ImageGCLowThresholdPercent is the disk usage image garbage collection frees down to.
	// +kubebuilder:validation:Minimum:=0
	// +kubebuilder:validation:Maximum:=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`
	// CPUCFSQuota enables CPU CFS quota enforcement for containers with CPU limits.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// MetadataOptions configure the instance metadata service of nodes.
type MetadataOptions struct {
	// HTTPEndpoint enables or disables the metadata endpoint.
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`
	// HTTPProtocolIPv6 enables the IPv6 metadata endpoint.
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum:={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`
	// HTTPPutResponseHopLimit is the hop limit of metadata responses; 1 keeps pods out.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum:=1
	// +kubebuilder:validation:Maximum:=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`
	// HTTPTokens "required" enforces IMDSv2.
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum:={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// BlockDeviceMapping attaches an EBS volume to each instance.
type BlockDeviceMapping struct {
	// DeviceName is the device name (for example /dev/xvda).
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`
	// EBS describes the volume.
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`
	// RootVolume marks the volume the kubelet uses for ephemeral storage.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice is an EBS volume.
// +kubebuilder:validation:XValidation:message="an ebs volume needs snapshotID or volumeSize",rule="has(self.snapshotID) || has(self.volumeSize)"
type BlockDevice struct {
	// DeleteOnTermination deletes the volume with the instance.
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`
	// Encrypted encrypts the volume.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`
	// IOPS for io1, io2 and gp3 volumes.
	// +optional
	IOPS *int64 `json:"iops,omitempty"`
	// KMSKeyID encrypts the volume with this key.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`
	// SnapshotID the volume is created from.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`
	// Throughput in MiB/s for gp3 volumes.
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`
	// VolumeSize of the volume, for example 20Gi.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type:=string
	// +kubebuilder:validation:Pattern:="^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty" hash:"string"`
	// VolumeType is standard, io1, io2, gp2, sc1, st1 or gp3.
	// +kubebuilder:validation:Enum:={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// InstanceStorePolicy says how local NVMe disks are used.
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 puts all local disks into one RAID0 array for ephemeral storage.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"

// Annotations on a NodeClaim that record where its instance was launched: its subnet and
// its security groups (comma-separated, sorted), which drift compares with the class's, and
// the launch template it was launched from, which launch-template clean-up keeps.
const (
	SubnetAnnotationKey         = "tailor.sh/subnet-id"
	SecurityGroupsAnnotationKey = "tailor.sh/security-group-ids"
	LaunchTemplateAnnotationKey = "tailor.sh/launch-template"
)

// Annotations on a NodeClaim that record the static hash (EC2NodeClass.Hash) of the class
// its instance was launched with, and the EC2NodeClassHashVersion of that hash.
const (
	EC2NodeClassHashAnnotationKey        = Group + "/ec2nodeclass-hash"
	EC2NodeClassHashVersionAnnotationKey = Group + "/ec2nodeclass-hash-version"
)

// EC2NodeClass condition types.
const (
	ConditionTypeSubnetsReady         = "SubnetsReady"
	ConditionTypeSecurityGroupsReady  = "SecurityGroupsReady"
	ConditionTypeAMIsReady            = "AMIsReady"
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
	ConditionTypeReady                = "Ready"
	// ConditionTypeCapacityReservationsReady is false while a capacityReservationSelectorTerm
	// matches no active reservation. It never makes the class not Ready: reservations are
	// optional, and the class launches on-demand and spot without them.
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
)

// EC2NodeClassStatus is what the selectors resolved to.
type EC2NodeClassStatus struct {
	// Subnets the selector terms resolved to.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`
	// SecurityGroups the selector terms resolved to.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`
	// AMIs the selector terms resolved to, with the requirements each one serves.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`
	// CapacityReservations the selector terms resolved to: the active ones only.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`
	// InstanceProfile used by the nodes.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`
	// Conditions (SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady,
	// CapacityReservationsReady, Ready).
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// ID of the subnet.
	// +required
	ID string `json:"id"`
	// Zone of the subnet.
	// +required
	Zone string `json:"zone"`
	// ZoneID of the subnet.
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID of the security group.
	// +required
	ID string `json:"id"`
	// Name of the security group.
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved image and the node requirements (architecture, say) it serves.
type AMI struct {
	// ID of the AMI.
	// +required
	ID string `json:"id"`
	// Name of the AMI.
	// +optional
	Name string `json:"name,omitempty"`
	// Requirements of the nodes this AMI boots.
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// Capacity reservation types: an on-demand capacity reservation, or a capacity block
// (reserved for a fixed period, its instances terminated before it ends).
const (
	CapacityReservationTypeDefault       = "default"
	CapacityReservationTypeCapacityBlock = "capacity-block"
)

// Capacity reservation states in status: active, or expiring (a capacity block within
// 40 minutes of its end, when EC2 warns that its instances will soon be
// terminated).
const (
	CapacityReservationStateActive   = "active"
	CapacityReservationStateExpiring = "expiring"
)

// CapacityBlockExpiryWarning is how long before its end a capacity block is expiring.
const CapacityBlockExpiryWarning = 40 * time.Minute

// Instance match criteria of a reservation: open (any matching on-demand launch uses it)
// or targeted (only launches that name it do).
const (
	CapacityReservationInstanceMatchCriteriaOpen     = "open"
	CapacityReservationInstanceMatchCriteriaTargeted = "targeted"
)

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	// ID of the capacity reservation.
	// +kubebuilder:validation:Pattern:="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`
	// InstanceType the reservation holds capacity for.
	// +required
	InstanceType string `json:"instanceType"`
	// AvailabilityZone of the reservation.
	// +required
	AvailabilityZone string `json:"availabilityZone"`
	// OwnerID is the account that owns the reservation.
	// +kubebuilder:validation:Pattern:="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`
	// InstanceMatchCriteria is open or targeted.
	// +kubebuilder:validation:Enum:={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`
	// ReservationType is default or capacity-block.
	// +kubebuilder:validation:Enum:={default,capacity-block}
	// +kubebuilder:default=default
	// +optional
	ReservationType string `json:"reservationType,omitempty"`
	// EndTime is when the reservation ends, if it has an end.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`
	// State is active or expiring.
	// +kubebuilder:validation:Enum:={active,expiring}
	// +kubebuilder:default=active
	// +optional
	State string `json:"state,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClasses.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EC2NodeClass `json:"items"`
}
