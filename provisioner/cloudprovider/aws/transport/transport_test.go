package transport

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/tailor-autoscaler/tailor/test/localaws"
)

// TestClientsSurviveFastAnswers pages through DescribeInstanceTypes without retries against
// a server that answers at loopback speed. Without requestBodyCopier most runs of 14 pages
// lost a connection mid-response; with it none may.
func TestClientsSurviveFastAnswers(t *testing.T) {
	endpoint, err := localaws.New(localaws.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	client := ec2.NewFromConfig(aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:     aws.String(srv.URL),
		RetryMaxAttempts: 1,
		HTTPClient:       NewClient(nil),
	})
	for run := 0; run < 20; run++ {
		pages := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{MaxResults: aws.Int32(100)})
		for pages.HasMorePages() {
			if _, err := pages.NextPage(context.Background()); err != nil {
				t.Fatalf("run %d: %v", run, err)
			}
		}
	}
}
