// Package privileges checks Tailor's grants against what its code does: the IAM policy
// against the AWS calls in the provisioner's source, and the RBAC of manifests/rbac and the
// chart against the requests its components make on the local stack, as the API server's
// audit log records them.
package privileges
