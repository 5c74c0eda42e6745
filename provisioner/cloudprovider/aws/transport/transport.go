// Package transport holds the HTTP client Tailor's AWS SDK clients send requests with.
package transport

import (
	"bytes"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// requestBodyCopier gives Go's HTTP transport its own copy of every request body. The SDK
// closes the body it built as soon as Do returns; when a server answers before the
// transport has finished with that body, the transport sees it end early, counts a write
// error and closes the connection under the response still being read, which surfaces as
// "use of closed network connection" while decoding. AWS API request bodies are small.
type requestBodyCopier struct {
	next aws.HTTPClient
}

func (c requestBodyCopier) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("reading request body: %w", err)
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return c.next.Do(req)
}

// NewClient wraps next (the SDK's default client when nil) so that every request body
// reaches the transport as a copy of its own.
func NewClient(next aws.HTTPClient) aws.HTTPClient {
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	return requestBodyCopier{next: next}
}
