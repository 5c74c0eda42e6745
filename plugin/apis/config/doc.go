// Package config holds the internal types of the arguments of Tailor's scheduler plugins.
//
// +k8s:deepcopy-gen=package
// +groupName=kubescheduler.config.k8s.io
package config
