package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/quilt-grid/quilt/internal/gateway"
)

// TestCheckBucketName: S3's naming rules, reserved prefixes and suffixes
// included.
func TestCheckBucketName(t *testing.T) {
	for _, bad := range []string{"xn--abc", "a.-b", "a-.b", "sthree-x", "sthree-configurator", "amzn-s3-demo-x",
		"data-s3alias", "data--ol-s3", "data.mrap", "data--x-s3", "data--table-s3", "192.168.5.4", "a..b",
		"ab", "Abc", "abc_d", "-abc", "abc-", strings.Repeat("a", 64), ""} {
		if err := gateway.CheckBucketName(bad); !errors.Is(err, gateway.ErrBadBucket) {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"abc", "a.b.c", "my-bucket-2026", "xn-abc", "s3alias", "1.2.3", "1.2.3.4.5", strings.Repeat("a", 63)} {
		if err := gateway.CheckBucketName(good); err != nil {
			t.Errorf("%q refused: %v", good, err)
		}
	}
}
