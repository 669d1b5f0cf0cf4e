package sigv4_test

import (
	"errors"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway/s3/sigv4"
)

// TestPostPolicy checks a POST form's credential fields and its policy
// signature, with the example of S3's documentation ("Example:
// Browser-Based Upload using HTTP POST (Using AWS Signature Version 4)").
func TestPostPolicy(t *testing.T) {
	const (
		secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
		policy = "eyAiZXhwaXJhdGlvbiI6ICIyMDE1LTEyLTMwVDEyOjAwOjAwLjAwMFoiLA0KICAiY29uZGl0aW9ucyI6IFsNCiAgICB7ImJ1Y2tldCI6ICJzaWd2NGV4YW1wbGVidWNrZXQifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRrZXkiLCAidXNlci91c2VyMS8iXSwNCiAgICB7ImFjbCI6ICJwdWJsaWMtcmVhZCJ9LA0KICAgIHsic3VjY2Vzc19hY3Rpb25fcmVkaXJlY3QiOiAiaHR0cDovL3NpZ3Y0ZXhhbXBsZWJ1Y2tldC5zMy5hbWF6b25hd3MuY29tL3N1Y2Nlc3NmdWxfdXBsb2FkLmh0bWwifSwNCiAgICBbInN0YXJ0cy13aXRoIiwgIiRDb250ZW50LVR5cGUiLCAiaW1hZ2UvIl0sDQogICAgeyJ4LWFtei1tZXRhLXV1aWQiOiAiMTQzNjUxMjM2NTEyNzQifSwNCiAgICB7IngtYW16LXNlcnZlci1zaWRlLWVuY3J5cHRpb24iOiAiQUVTMjU2In0sDQogICAgWyJzdGFydHMtd2l0aCIsICIkeC1hbXotbWV0YS10YWciLCAiIl0sDQoNCiAgICB7IngtYW16LWNyZWRlbnRpYWwiOiAiQUtJQUlPU0ZPRE5ON0VYQU1QTEUvMjAxNTEyMjkvdXMtZWFzdC0xL3MzL2F3czRfcmVxdWVzdCJ9LA0KICAgIHsieC1hbXotYWxnb3JpdGhtIjogIkFXUzQtSE1BQy1TSEEyNTYifSwNCiAgICB7IngtYW16LWRhdGUiOiAiMjAxNTEyMjlUMDAwMDAwWiIgfQ0KICBdDQp9"
		sig    = "8afdbf4008c03f22c2cd3cdb72e4afbb1f6a588f3255ac628749a66d7f09699e"
	)
	c, err := sigv4.ParsePostCredential("AWS4-HMAC-SHA256", "AKIAIOSFODNN7EXAMPLE/20151229/us-east-1/s3/aws4_request", "20151229T000000Z")
	if err != nil || c.AccessKey != "AKIAIOSFODNN7EXAMPLE" || c.Region != "us-east-1" {
		t.Fatalf("credential: %+v %v", c, err)
	}
	if got := sigv4.SignPostPolicy(secret, c, policy); got != sig {
		t.Fatalf("signature %s, want %s", got, sig)
	}
	if err := sigv4.VerifyPostPolicy(secret, c, policy, sig); err != nil {
		t.Fatal(err)
	}
	var e *sigv4.Error
	if err := sigv4.VerifyPostPolicy(secret, c, policy+"x", sig); !errors.As(err, &e) || e.Code != "SignatureDoesNotMatch" {
		t.Fatalf("altered policy: %v", err)
	}
	for _, bad := range [][3]string{
		{"AWS4-HMAC-SHA1", "AKID/20151229/us-east-1/s3/aws4_request", "20151229T000000Z"},
		{"AWS4-HMAC-SHA256", "AKID/20151228/us-east-1/s3/aws4_request", "20151229T000000Z"}, // another day
		{"AWS4-HMAC-SHA256", "AKID/20151229/us-east-1/ec2/aws4_request", "20151229T000000Z"},
		{"AWS4-HMAC-SHA256", "AKID/20151229/us-east-1/s3/aws4_request", "yesterday"},
		{"AWS4-HMAC-SHA256", "/20151229/us-east-1/s3/aws4_request", "20151229T000000Z"},
	} {
		if _, err := sigv4.ParsePostCredential(bad[0], bad[1], bad[2]); !errors.As(err, &e) || e.Code != "InvalidArgument" {
			t.Errorf("%v: %v", bad, err)
		}
	}
}
