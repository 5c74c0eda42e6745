package cloudprovider

import (
	"errors"
	"fmt"
)

// NodeClaimNotFoundError says the instance of a NodeClaim does not exist (any more).
type NodeClaimNotFoundError struct{ err error }

// NewNodeClaimNotFoundError wraps err as a NodeClaimNotFoundError.
func NewNodeClaimNotFoundError(err error) *NodeClaimNotFoundError {
	return &NodeClaimNotFoundError{err: err}
}

func (e *NodeClaimNotFoundError) Error() string { return fmt.Sprintf("instance not found: %v", e.err) }
func (e *NodeClaimNotFoundError) Unwrap() error { return e.err }

// IsNodeClaimNotFoundError reports whether err is, or wraps, a NodeClaimNotFoundError.
func IsNodeClaimNotFoundError(err error) bool {
	var target *NodeClaimNotFoundError
	return errors.As(err, &target)
}

// IgnoreNodeClaimNotFoundError returns nil for a NodeClaimNotFoundError and err otherwise.
func IgnoreNodeClaimNotFoundError(err error) error {
	if IsNodeClaimNotFoundError(err) {
		return nil
	}
	return err
}

// InsufficientCapacityError says none of the offerings a NodeClaim allows could be launched.
type InsufficientCapacityError struct{ err error }

// NewInsufficientCapacityError wraps err as an InsufficientCapacityError.
func NewInsufficientCapacityError(err error) *InsufficientCapacityError {
	return &InsufficientCapacityError{err: err}
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity: %v", e.err)
}
func (e *InsufficientCapacityError) Unwrap() error { return e.err }

// IsInsufficientCapacityError reports whether err is, or wraps, an InsufficientCapacityError.
func IsInsufficientCapacityError(err error) bool {
	var target *InsufficientCapacityError
	return errors.As(err, &target)
}

// ErrSubnetsFull is wrapped by a launch's InsufficientCapacityError when every subnet of the
// node class is out of free IP addresses: no capacity error clears by itself then.
var ErrSubnetsFull = errors.New("every subnet is out of free IP addresses")

// NodeClassNotReadyError says a node class cannot be used to launch yet, and why.
type NodeClassNotReadyError struct{ err error }

// NewNodeClassNotReadyError wraps err as a NodeClassNotReadyError.
func NewNodeClassNotReadyError(err error) *NodeClassNotReadyError {
	return &NodeClassNotReadyError{err: err}
}

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("node class not ready: %v", e.err)
}
func (e *NodeClassNotReadyError) Unwrap() error { return e.err }

// IsNodeClassNotReadyError reports whether err is, or wraps, a NodeClassNotReadyError.
func IsNodeClassNotReadyError(err error) bool {
	var target *NodeClassNotReadyError
	return errors.As(err, &target)
}
