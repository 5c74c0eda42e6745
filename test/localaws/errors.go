package localaws

import (
	"errors"
	"fmt"
)

// Error codes shared by several actions. Each is the code real AWS returns, because callers
// branch on them.
const (
	codeInvalidParameterValue       = "InvalidParameterValue"
	codeMissingParameter            = "MissingParameter"
	codeInvalidPaginationToken      = "InvalidPaginationToken"
	codeInsufficientCapacity        = "InsufficientInstanceCapacity"
	codeInsufficientFreeAddresses   = "InsufficientFreeAddressesInSubnet"
	codeUnsupported                 = "Unsupported"
	codeLaunchTemplateNameNotFound  = "InvalidLaunchTemplateName.NotFoundException"
	codeLaunchTemplateIDNotFound    = "InvalidLaunchTemplateId.NotFound"
	codeLaunchTemplateVersionAbsent = "InvalidLaunchTemplateId.VersionNotFound"
	codeInstanceNotFound            = "InvalidInstanceID.NotFound"
)

// apiError is a failure reported to the client in its protocol's error format. The code is
// what SDK callers see as smithy.APIError.ErrorCode().
type apiError struct {
	code    string
	message string
	// status is the HTTP status to answer with; zero means 400.
	status int
}

// Error implements error.
func (e *apiError) Error() string { return e.code + ": " + e.message }

// newAPIError returns an apiError with a formatted message.
func newAPIError(code, format string, args ...any) *apiError {
	return &apiError{code: code, message: fmt.Sprintf(format, args...)}
}

// invalidParameter reports a malformed or out-of-range request parameter.
func invalidParameter(format string, args ...any) *apiError {
	return newAPIError(codeInvalidParameterValue, format, args...)
}

// asAPIError returns err as an apiError; an error of any other kind becomes an InternalError.
func asAPIError(err error) *apiError {
	var apiErr *apiError
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return newAPIError("InternalError", "An internal error has occurred: %v", err)
}
