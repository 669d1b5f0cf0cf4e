package bulk

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go/middleware"
)

// ErrNoCredentials is an Endpoint without a URL or keys.
var ErrNoCredentials = errors.New("bulk: no S3 endpoint or credentials")

// Endpoint is how to reach a gateway's S3 API.
type Endpoint struct {
	URL       string // http://HOST:PORT or https://...
	KeyID     string
	Secret    string
	Region    string            // default us-east-1
	CABundle  string            // PEM file of CAs to trust for https (the gateway's own CA); empty: the system's
	Transport http.RoundTripper // nil: a transport of its own (tests wrap it)
}

// NewClient returns an S3 client of the endpoint as the copier wants it:
// path-style addressing (bucket names need no DNS), payloads unsigned
// (the x-amz-checksum-sha256 of each body is what protects it, and the
// body is read once more only to hash it), no checksums added or
// validated by the SDK itself (the copier sends and checks its own), and
// the SDK's retries of throttling, 5xx answers and broken connections.
func NewClient(e Endpoint) (*s3.Client, error) {
	if e.URL == "" || e.KeyID == "" || e.Secret == "" {
		return nil, ErrNoCredentials
	}
	if e.Region == "" {
		e.Region = "us-east-1"
	}
	rt := e.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 64
		t.ResponseHeaderTimeout = 10 * time.Minute
		if e.CABundle != "" {
			pem, err := os.ReadFile(e.CABundle)
			if err != nil {
				return nil, fmt.Errorf("bulk: CA bundle: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("bulk: CA bundle %s holds no PEM certificate", e.CABundle)
			}
			t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		rt = t
	}
	return s3.New(s3.Options{
		BaseEndpoint:               aws.String(e.URL),
		Region:                     e.Region,
		UsePathStyle:               true,
		Credentials:                credentials.NewStaticCredentialsProvider(e.KeyID, e.Secret, ""),
		HTTPClient:                 &http.Client{Transport: rt},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		// Five attempts, at most 5 s apart (the SDK's 20 s is long to wait
		// for a gateway that is not there; an interrupted copy resumes).
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 5
			o.MaxBackoff = 5 * time.Second
		}),
		APIOptions: []func(*middleware.Stack) error{v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware},
	}), nil
}
