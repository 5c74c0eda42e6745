// Package v1 holds the versioned (kubescheduler.config.k8s.io/v1) arguments of Tailor's
// scheduler plugins, as written in a KubeSchedulerConfiguration.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/tailor-autoscaler/tailor/plugin/apis/config
// +k8s:defaulter-gen=TypeMeta
// +groupName=kubescheduler.config.k8s.io
package v1
