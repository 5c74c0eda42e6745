package localaws

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// jsonContentType is the media type of AWS JSON 1.1 requests and responses.
const jsonContentType = "application/x-amz-json-1.1"

// jsonError is the AWS JSON 1.1 error document.
type jsonError struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// serveJSON handles an AWS JSON 1.1 request, whose operation is named by X-Amz-Target as
// "Service.Operation".
func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request) {
	requestID := s.newRequestID()
	target := r.Header.Get("X-Amz-Target")
	service, operation, _ := strings.Cut(target, ".")
	s.logger.V(4).Info("JSON request", "target", target, "requestID", requestID)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeJSONError(w, requestID, newAPIError("SerializationException", "Reading the request body: %v", err))
		return
	}
	if err := s.admit(operation, codeJSONThrottled); err != nil {
		s.writeJSONError(w, requestID, err)
		return
	}
	var resp any
	switch service {
	case "AmazonSSM":
		resp, err = s.ssmAction(operation, body)
	case "AWSPriceListService":
		resp, err = s.pricingAction(operation, body)
	default:
		err = newAPIError("UnknownOperationException", "Unknown service target %q.", target)
	}
	if err != nil {
		s.writeJSONError(w, requestID, err)
		return
	}
	out, err := json.Marshal(resp)
	if err != nil {
		s.writeJSONError(w, requestID, err)
		return
	}
	w.Header().Set("Content-Type", jsonContentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	_, _ = w.Write(out)
}

// writeJSONError writes err as an AWS JSON 1.1 error: status 400 for errors of the request,
// 500 for failures of the server.
func (s *Server) writeJSONError(w http.ResponseWriter, requestID string, err error) {
	status := http.StatusBadRequest
	var apiErr *apiError
	if !errors.As(err, &apiErr) {
		s.logger.Error(err, "failed to serve JSON request", "requestID", requestID)
		status = http.StatusInternalServerError
		apiErr = newAPIError("InternalServerError", "An internal error has occurred: %v", err)
	} else if apiErr.status != 0 {
		status = apiErr.status
	}
	out, encErr := json.Marshal(jsonError{Type: apiErr.code, Message: apiErr.message})
	if encErr != nil {
		http.Error(w, encErr.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", jsonContentType)
	w.Header().Set("X-Amzn-RequestId", requestID)
	w.WriteHeader(status)
	_, _ = w.Write(out)
}

// decodeJSON decodes a request body; an empty body is an empty request.
func decodeJSON(body []byte, into any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, into); err != nil {
		return newAPIError("SerializationException", "The request body could not be decoded: %v", err)
	}
	return nil
}
