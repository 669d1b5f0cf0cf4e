package s3_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jonboulle/clockwork"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// TestLifecycleConfiguration: Put, Get and Delete of ?lifecycle with
// aws-sdk-go-v2, S3's answers to malformed and refused rules, and only
// an owner setting them.
func TestLifecycleConfiguration(t *testing.T) {
	e := newEnv(t, 3)
	c := e.client(e.admin)
	ctx := context.Background()
	b := aws.String("lcb")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if code(err) != "NoSuchLifecycleConfiguration" || status(err) != 404 {
		t.Fatalf("get before any: %v", err)
	}
	cfg := &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
		{ID: aws.String("logs"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		{ID: aws.String("temp"), Status: types.ExpirationStatusEnabled,
			Filter:     &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String("t/"), Tags: []types.Tag{{Key: aws.String("temp"), Value: aws.String("yes")}}}},
			Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}},
		{ID: aws.String("uploads"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(7)}},
	}}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rules) != 3 {
		t.Fatalf("rules: %+v", got.Rules)
	}
	r0, r1, r2 := got.Rules[0], got.Rules[1], got.Rules[2]
	if aws.ToString(r0.ID) != "logs" || aws.ToString(r0.Filter.Prefix) != "logs/" || aws.ToInt32(r0.Expiration.Days) != 1 || r0.Status != types.ExpirationStatusEnabled {
		t.Errorf("rule 0: %+v", r0)
	}
	if r1.Filter.And == nil || aws.ToString(r1.Filter.And.Prefix) != "t/" || len(r1.Filter.And.Tags) != 1 || !aws.ToTime(r1.Expiration.Date).Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("rule 1: %+v", r1)
	}
	if r2.Status != types.ExpirationStatusDisabled || aws.ToInt32(r2.AbortIncompleteMultipartUpload.DaysAfterInitiation) != 7 {
		t.Errorf("rule 2: %+v", r2)
	}

	// Answers name the rule that will expire an object.
	po, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("logs/x"), Body: strings.NewReader("x")})
	if err != nil || !strings.Contains(aws.ToString(po.Expiration), `rule-id="logs"`) {
		t.Errorf("put under a rule: expiration %q, %v", aws.ToString(po.Expiration), err)
	}
	po, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("other"), Body: strings.NewReader("x")})
	if err != nil || po.Expiration != nil {
		t.Errorf("put under no rule: expiration %q, %v", aws.ToString(po.Expiration), err)
	}

	// A key that may write the bucket but does not own it.
	w := e.key(t, false)
	w.Buckets = map[string]gateway.Perm{"lcb": gateway.Write}
	if err := e.gw.PutKey(ctx, w); err != nil {
		t.Fatal(err)
	}
	_, err = e.client(w).PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: cfg})
	if code(err) != "AccessDenied" {
		t.Errorf("put by a non-owner: %v", err)
	}
	if _, err := e.client(w).DeleteBucketLifecycle(ctx, &awss3.DeleteBucketLifecycleInput{Bucket: b}); code(err) != "AccessDenied" {
		t.Errorf("delete by a non-owner: %v", err)
	}

	// Malformed and refused configurations change nothing.
	rule := func(inner string) string {
		return `<LifecycleConfiguration><Rule>` + inner + `</Rule></LifecycleConfiguration>`
	}
	exp1 := `<Expiration><Days>1</Days></Expiration>`
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{"not xml", 400, "MalformedXML"},
		{`<LifecycleConfiguration></LifecycleConfiguration>`, 400, "MalformedXML"},
		{rule(`<Filter/>` + exp1), 400, "MalformedXML"},                    // no Status
		{rule(`<Status>On</Status><Filter/>` + exp1), 400, "MalformedXML"}, // bad Status
		{rule(`<Status>Enabled</Status>` + exp1), 400, "MalformedXML"},     // no Filter nor Prefix
		{rule(`<Status>Enabled</Status><Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>` + exp1), 400, "MalformedXML"},
		{rule(`<Status>Enabled</Status><Filter/><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration>`), 400, "MalformedXML"},
		{rule(`<Status>Enabled</Status><Filter/><Expiration><Days>x</Days></Expiration>`), 400, "MalformedXML"},
		{rule(`<Status>Enabled</Status><Filter/><Expiration><Days>0</Days></Expiration>`), 400, "InvalidArgument"},
		{rule(`<Status>Enabled</Status><Filter/><Expiration><Date>2030-01-01T10:00:00Z</Date></Expiration>`), 400, "InvalidArgument"},
		{rule(`<Status>Enabled</Status><Filter/>`), 400, "InvalidRequest"}, // no action
		{rule(`<Status>Enabled</Status><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), 400, "InvalidRequest"},
		{rule(`<Status>Enabled</Status><Filter/><AbortIncompleteMultipartUpload><DaysAfterInitiation>0</DaysAfterInitiation></AbortIncompleteMultipartUpload>`), 400, "InvalidArgument"},
		{rule(`<Status>Enabled</Status><Filter/><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration>`), 501, "NotImplemented"},
		{rule(`<Status>Enabled</Status><Filter/><Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition>`), 501, "NotImplemented"},
		{rule(`<Status>Enabled</Status><Filter/><Bogus/>` + exp1), 400, "MalformedXML"},
		{`<LifecycleConfiguration><Rule><ID>x</ID><Status>Enabled</Status><Filter/>` + exp1 + `</Rule><Rule><ID>x</ID><Status>Enabled</Status><Filter/>` + exp1 + `</Rule></LifecycleConfiguration>`, 400, "InvalidArgument"},
		{rule(`<ID>` + strings.Repeat("i", 256) + `</ID><Status>Enabled</Status><Filter/>` + exp1), 400, "InvalidArgument"},
		{rule(`<Status>Enabled</Status><Filter><Tag><Key>aws:k</Key><Value>v</Value></Tag></Filter>` + exp1), 400, "InvalidTag"},
	} {
		resp, body := e.do(t, e.admin, "PUT", "/lcb?lifecycle", []byte(tc.body))
		if resp.StatusCode != tc.status || !strings.Contains(string(body), "<Code>"+tc.code+"</Code>") {
			t.Errorf("%s: %d %s, want %d %s", tc.body, resp.StatusCode, body, tc.status, tc.code)
		}
	}
	if got, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: b}); err != nil || len(got.Rules) != 3 {
		t.Errorf("after refused puts: %v", err)
	}
	// The older form: Prefix in the rule.
	if resp, body := e.do(t, e.admin, "PUT", "/lcb?lifecycle", []byte(rule(`<Prefix>old/</Prefix><Status>Enabled</Status>`+exp1))); resp.StatusCode != 200 {
		t.Errorf("rule with a Prefix: %d %s", resp.StatusCode, body)
	}
	if _, err := c.DeleteBucketLifecycle(ctx, &awss3.DeleteBucketLifecycleInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: b}); code(err) != "NoSuchLifecycleConfiguration" {
		t.Errorf("get after delete: %v", err)
	}
	if _, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: aws.String("nosuch")}); code(err) != "NoSuchBucket" {
		t.Errorf("get of a missing bucket: %v", err)
	}
}

// TestLifecycleSweep: the gateway's sweep, on a fake clock moved by
// days, expires objects by prefix, by tag, by size and by date, aborts
// old uploads, and leaves what no enabled rule selects; RunLifecycle
// sweeps on its ticker.
func TestLifecycleSweep(t *testing.T) {
	fake := clockwork.NewFakeClockAt(time.Now())
	e := newEnvWith(t, testgrid.Options{Nodes: 3}, s3.Options{Clock: fake, LifecycleEvery: time.Hour})
	c := e.client(e.admin)
	ctx := context.Background()
	b := aws.String("sweep")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	dated := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 6)
	cfg := &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
		{ID: aws.String("logs"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		{ID: aws.String("temp"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Tag: &types.Tag{Key: aws.String("temp"), Value: aws.String("yes")}},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(3)}},
		{ID: aws.String("big"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{And: &types.LifecycleRuleAndOperator{Prefix: aws.String("size/"), ObjectSizeGreaterThan: aws.Int64(10)}},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(3)}},
		{ID: aws.String("dated"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("dated/")},
			Expiration: &types.LifecycleExpiration{Date: aws.Time(dated)}},
		{ID: aws.String("off"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("keep/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}},
		{ID: aws.String("uploads"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("up/")},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(3)}},
	}}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	put := func(key, body, tags string) {
		t.Helper()
		in := &awss3.PutObjectInput{Bucket: b, Key: aws.String(key), Body: strings.NewReader(body)}
		if tags != "" {
			in.Tagging = aws.String(tags)
		}
		if _, err := c.PutObject(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	put("logs/a", "x", "")
	put("logs/b", "x", "")
	put("keep/c", "x", "")
	put("tagged", "x", "temp=yes")
	put("tagged-no", "x", "temp=no")
	put("size/small", "x", "")
	put("size/large", "more than ten bytes", "")
	put("dated/d", "x", "")
	up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("up/big")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("elsewhere")})
	if err != nil {
		t.Fatal(err)
	}
	keys := func() string {
		t.Helper()
		out, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, o := range out.Contents {
			ks = append(ks, aws.ToString(o.Key))
		}
		return strings.Join(ks, " ")
	}
	uploads := func() string {
		t.Helper()
		out, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: b})
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, u := range out.Uploads {
			ks = append(ks, aws.ToString(u.Key))
		}
		return strings.Join(ks, " ")
	}
	// HEAD says when, and by which rule (S3's day count: to the
	// midnight after the write and the days).
	for key, rule := range map[string]string{"logs/a": "logs", "tagged": "temp", "size/large": "big", "dated/d": "dated", "keep/c": "", "size/small": ""} {
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		got := aws.ToString(h.Expiration)
		if rule == "" {
			if got != "" {
				t.Errorf("%s: expiration %q, want none", key, got)
			}
			continue
		}
		days := map[string]int{"logs": 1, "temp": 3, "big": 3}[rule]
		due := dated
		if days > 0 {
			at := aws.ToTime(h.LastModified).UTC().Add(time.Duration(days) * 24 * time.Hour)
			if due = at.Truncate(24 * time.Hour); due.Before(at) {
				due = due.Add(24 * time.Hour)
			}
		}
		if want := `expiry-date="` + due.Format(http.TimeFormat) + `", rule-id="` + rule + `"`; got != want {
			t.Errorf("%s: expiration %q, want %q", key, got, want)
		}
	}
	all := "dated/d keep/c logs/a logs/b size/large size/small tagged tagged-no"
	const day = 24 * time.Hour
	sweep := func(d time.Duration, wantKeys, wantUploads string) {
		t.Helper()
		fake.Advance(d)
		if err := e.s3.SweepLifecycle(ctx); err != nil {
			t.Fatal(err)
		}
		if got := keys(); got != wantKeys {
			t.Errorf("after %v: keys %q, want %q", fake.Since(time.Now()), got, wantKeys)
		}
		if got := uploads(); got != wantUploads {
			t.Errorf("after %v: uploads %q, want %q", fake.Since(time.Now()), got, wantUploads)
		}
	}
	// S3 counts days from the write to the midnight (UTC) after: an
	// object 1 day old is due between 1 and 2 days after its write.
	sweep(0, all, "elsewhere up/big")
	sweep(day, all, "elsewhere up/big")
	sweep(day+time.Hour, "dated/d keep/c size/large size/small tagged tagged-no", "elsewhere up/big")
	sweep(2*day+time.Hour, "dated/d keep/c size/small tagged-no", "elsewhere")
	if _, err := c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: b, Key: aws.String("up/big"), UploadId: up.UploadId}); code(err) != "NoSuchUpload" {
		t.Errorf("the aborted upload: %v", err)
	}
	_ = other

	// An object written again since it was listed is not removed.
	info, err := e.gw.Head(ctx, "sweep", "keep/c")
	if err != nil {
		t.Fatal(err)
	}
	put("keep/c", "new", "")
	if err := e.gw.DeleteVersion(ctx, "sweep", "keep/c", info.Version); !errors.Is(err, gateway.ErrPrecondition) {
		t.Errorf("delete of an old version: %v", err)
	}

	// The loop: the dated rule's day comes on the ticker.
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { e.s3.RunLifecycle(lctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := fake.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	fake.Advance(3 * day)
	waitFor(t, "the dated object to expire", func() bool { return !strings.Contains(keys(), "dated/d") })
	if got := keys(); got != "keep/c size/small tagged-no" {
		t.Errorf("after the loop: %q", got)
	}
}
