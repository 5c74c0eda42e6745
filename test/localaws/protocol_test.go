package localaws

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProtocolErrors(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		name        string
		target      string
		contentType string
		body        string
		wantStatus  int
		wantBody    string
	}{
		{
			name: "unknown EC2 action", contentType: "application/x-www-form-urlencoded", body: "Action=RunInstances&Version=2016-11-15",
			wantStatus: http.StatusBadRequest,
			wantBody:   `<Response><Errors><Error><Code>InvalidAction</Code><Message>The action RunInstances is not valid for this web service.</Message></Error></Errors><RequestID>`,
		},
		{
			name: "no action", contentType: "application/x-www-form-urlencoded", body: "Version=2016-11-15",
			wantStatus: http.StatusBadRequest,
			wantBody:   `<Code>MissingAction</Code>`,
		},
		{
			name: "unknown SSM operation", target: "AmazonSSM.PutParameter", contentType: jsonContentType, body: `{}`,
			wantStatus: http.StatusBadRequest,
			wantBody:   `{"__type":"UnknownOperationException","message":"The operation AmazonSSM.PutParameter is not served by the local endpoint."}`,
		},
		{
			name: "unknown service", target: "DynamoDB_20120810.ListTables", contentType: jsonContentType, body: `{}`,
			wantStatus: http.StatusBadRequest,
			wantBody:   `{"__type":"UnknownOperationException","message":"Unknown service target \"DynamoDB_20120810.ListTables\"."}`,
		},
		{
			name: "malformed JSON", target: "AmazonSSM.GetParameter", contentType: jsonContentType, body: `{"Name":`,
			wantStatus: http.StatusBadRequest,
			wantBody:   `{"__type":"SerializationException"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(h.ctx, http.MethodPost, h.url+"/", strings.NewReader(tt.body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", tt.contentType)
			if tt.target != "" {
				req.Header.Set("X-Amz-Target", tt.target)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tt.wantStatus, resp.StatusCode)
			require.Contains(t, string(body), tt.wantBody)
		})
	}
}
