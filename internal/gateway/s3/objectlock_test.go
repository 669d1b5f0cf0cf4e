package s3_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/jonboulle/clockwork"
	"github.com/quilt-grid/quilt/internal/gateway"
	"github.com/quilt-grid/quilt/internal/gateway/s3"
	"github.com/quilt-grid/quilt/internal/object"
	"github.com/quilt-grid/quilt/internal/testgrid"
)

// lockBucket makes a bucket with object lock.
func lockBucket(t *testing.T, c *awss3.Client, name string) {
	t.Helper()
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String(name), ObjectLockEnabledForBucket: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
}

// putLocked writes key with a retention (mode "": none) and a legal
// hold, and returns its version ID.
func putLocked(t *testing.T, c *awss3.Client, bucket, key string, mode types.ObjectLockMode, until time.Time, hold bool) string {
	t.Helper()
	in := &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("body of " + key)}
	if mode != "" {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = mode, aws.Time(until)
	}
	if hold {
		in.ObjectLockLegalHoldStatus = types.ObjectLockLegalHoldStatusOn
	}
	out, err := c.PutObject(context.Background(), in)
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	if aws.ToString(out.VersionId) == "" {
		t.Fatalf("put %s: no version ID", key)
	}
	return aws.ToString(out.VersionId)
}

func deleteVersion(c *awss3.Client, bucket, key, vid string, bypass bool) error {
	in := &awss3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), VersionId: aws.String(vid)}
	if bypass {
		in.BypassGovernanceRetention = aws.Bool(true)
	}
	_, err := c.DeleteObject(context.Background(), in)
	return err
}

// TestObjectLockConfiguration: CreateBucket with object lock turns
// versioning on for good; Get/PutObjectLockConfiguration with default
// retention, and what S3 answers on a bucket without object lock.
func TestObjectLockConfiguration(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	c := e.client(e.admin)
	lockBucket(t, c, "lockcfg")
	v, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("lockcfg")})
	if err != nil || v.Status != types.BucketVersioningStatusEnabled {
		t.Fatalf("versioning of an object lock bucket: %v %q", err, v.Status)
	}
	_, err = c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String("lockcfg"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	mustCode(t, "suspending versioning of an object lock bucket", err, "InvalidBucketState")
	cfg, err := c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String("lockcfg")})
	if err != nil || cfg.ObjectLockConfiguration.ObjectLockEnabled != types.ObjectLockEnabledEnabled || cfg.ObjectLockConfiguration.Rule != nil {
		t.Fatalf("GetObjectLockConfiguration of a new lock bucket: %v %+v", err, cfg)
	}

	putCfg := func(bucket string, c2 *types.ObjectLockConfiguration) error {
		_, err := c.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String(bucket), ObjectLockConfiguration: c2})
		return err
	}
	rule := func(mode types.ObjectLockRetentionMode, days, years int32) *types.ObjectLockConfiguration {
		d := &types.DefaultRetention{Mode: mode}
		if days != 0 {
			d.Days = aws.Int32(days)
		}
		if years != 0 {
			d.Years = aws.Int32(years)
		}
		return &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled, Rule: &types.ObjectLockRule{DefaultRetention: d}}
	}
	mustCode(t, "Days and Years", putCfg("lockcfg", rule(types.ObjectLockRetentionModeGovernance, 1, 1)), "MalformedXML")
	mustCode(t, "no period", putCfg("lockcfg", rule(types.ObjectLockRetentionModeGovernance, 0, 0)), "MalformedXML")
	mustCode(t, "a bad mode", putCfg("lockcfg", rule("FOREVER", 1, 0)), "MalformedXML")
	mustCode(t, "negative days", putCfg("lockcfg", rule(types.ObjectLockRetentionModeCompliance, -1, 0)), "InvalidArgument")
	mustCode(t, "ObjectLockEnabled missing", putCfg("lockcfg", &types.ObjectLockConfiguration{}), "MalformedXML")
	if err := putCfg("lockcfg", rule(types.ObjectLockRetentionModeGovernance, 2, 0)); err != nil {
		t.Fatal(err)
	}
	cfg, err = c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String("lockcfg")})
	if err != nil || cfg.ObjectLockConfiguration.Rule == nil || cfg.ObjectLockConfiguration.Rule.DefaultRetention.Mode != types.ObjectLockRetentionModeGovernance ||
		aws.ToInt32(cfg.ObjectLockConfiguration.Rule.DefaultRetention.Days) != 2 {
		t.Fatalf("default retention read back: %v %+v", err, cfg)
	}
	// New versions get it, dated from their write.
	before := time.Now()
	vid := putLocked(t, c, "lockcfg", "k", "", time.Time{}, false)
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("lockcfg"), Key: aws.String("k")})
	if err != nil || h.ObjectLockMode != types.ObjectLockModeGovernance || h.ObjectLockRetainUntilDate == nil {
		t.Fatalf("HEAD of a version with default retention: %v %+v", err, h)
	}
	if u := *h.ObjectLockRetainUntilDate; u.Before(before.Add(48*time.Hour-time.Second)) || u.After(time.Now().Add(48*time.Hour+time.Second)) {
		t.Errorf("default retention until %v, want two days from %v", u, before)
	}
	mustCode(t, "deleting a version under default retention", deleteVersion(c, "lockcfg", "k", vid, false), "AccessDenied")
	// A retention given with the write wins over the default.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	putLocked(t, c, "lockcfg", "k2", types.ObjectLockModeCompliance, until, false)
	r, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String("lockcfg"), Key: aws.String("k2")})
	if err != nil || r.Retention.Mode != types.ObjectLockRetentionModeCompliance || !r.Retention.RetainUntilDate.Equal(until) {
		t.Fatalf("retention of a write that gives one: %v %+v", err, r)
	}
	// Removing the default leaves object lock on.
	if err := putCfg("lockcfg", &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}); err != nil {
		t.Fatal(err)
	}
	putLocked(t, c, "lockcfg", "k3", "", time.Time{}, false)
	_, err = c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String("lockcfg"), Key: aws.String("k3")})
	mustCode(t, "retention of a version with none", err, "NoSuchObjectLockConfiguration")

	// A bucket without object lock.
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("plain")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("o"), Body: strings.NewReader("o")}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String("plain")})
	mustCode(t, "GetObjectLockConfiguration without object lock", err, "ObjectLockConfigurationNotFoundError")
	_, err = c.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String("plain"), Key: aws.String("o"),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(until)}})
	mustCode(t, "PutObjectRetention without object lock", err, "InvalidRequest")
	_, err = c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String("plain"), Key: aws.String("o")})
	mustCode(t, "GetObjectRetention without object lock", err, "InvalidRequest")
	_, err = c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String("plain"), Key: aws.String("o"),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	mustCode(t, "PutObjectLegalHold without object lock", err, "InvalidRequest")
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("plain"), Key: aws.String("o"), Body: strings.NewReader("x"),
		ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(until)})
	mustCode(t, "PutObject with a retention without object lock", err, "InvalidRequest")
	if got, _ := get(c, "plain", "o"); got != "o" {
		t.Errorf("the refused PUT changed the object: %q", got)
	}
	mustCode(t, "PutObjectLockConfiguration on an unversioned bucket", putCfg("plain", rule(types.ObjectLockRetentionModeGovernance, 1, 0)), "InvalidBucketState")
	if _, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: aws.String("plain")}); err != nil {
		t.Fatal(err)
	}
	// An existing bucket with versioning Enabled may take object lock.
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String("plain"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	if err := putCfg("plain", rule(types.ObjectLockRetentionModeGovernance, 1, 0)); err != nil {
		t.Fatalf("object lock on a versioned bucket: %v", err)
	}
	if _, err := c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: aws.String("plain")}); err != nil {
		t.Fatal(err)
	}
	// A key that does not own the bucket may not change its configuration.
	kw, err := e.gw.CreateKey(ctx, false, map[string]gateway.Perm{"lockcfg": gateway.Write})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.client(kw).PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String("lockcfg"),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}})
	mustCode(t, "PutObjectLockConfiguration by a writer", err, "AccessDenied")
	_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("lockcfg-2")})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := e.do(t, e.admin, "PUT", "/lockcfg-3", nil, "x-amz-bucket-object-lock-enabled", "perhaps")
	if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
		t.Errorf("x-amz-bucket-object-lock-enabled: perhaps: %d %s", resp.StatusCode, body)
	}
}

// TestObjectLockRetention: retention and legal hold per version, and
// the deletes they refuse: a locked version cannot be deleted (DELETE
// with versionId, DeleteObjects) while a delete marker can be made;
// GOVERNANCE gives way to x-amz-bypass-governance-retention from a key
// allowed to, COMPLIANCE to nothing; legal hold on and off.
func TestObjectLockRetention(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	c := e.client(e.admin)
	const b = "lockret"
	lockBucket(t, c, b)
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	later := soon.Add(time.Hour)

	t.Run("governance", func(t *testing.T) {
		vid := putLocked(t, c, b, "gov", types.ObjectLockModeGovernance, soon, false)
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("gov"), VersionId: aws.String(vid)})
		if err != nil || h.ObjectLockMode != types.ObjectLockModeGovernance || !aws.ToTime(h.ObjectLockRetainUntilDate).Equal(soon) ||
			h.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOff {
			t.Fatalf("HEAD: %v %+v", err, h)
		}
		mustCode(t, "deleting a GOVERNANCE version", deleteVersion(c, b, "gov", vid, false), "AccessDenied")
		// A plain DELETE makes a delete marker; the version stays.
		d, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(b), Key: aws.String("gov")})
		if err != nil || !aws.ToBool(d.DeleteMarker) {
			t.Fatalf("delete marker: %v %+v", err, d)
		}
		if got := body(t, c, b, "gov", vid); got != "body of gov" {
			t.Fatalf("the locked version after a delete marker: %q", got)
		}
		// Multi-delete of the version is refused for that key.
		del, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(b), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
			{Key: aws.String("gov"), VersionId: aws.String(vid)}}}})
		if err != nil || len(del.Errors) != 1 || aws.ToString(del.Errors[0].Code) != "AccessDenied" || len(del.Deleted) != 0 {
			t.Fatalf("DeleteObjects of a locked version: %v %+v", err, del)
		}
		// Lengthening needs no bypass; shortening and removing do.
		setRet := func(mode types.ObjectLockRetentionMode, until time.Time, bypass bool) error {
			in := &awss3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("gov"), VersionId: aws.String(vid),
				Retention: &types.ObjectLockRetention{Mode: mode}}
			if !until.IsZero() {
				in.Retention.RetainUntilDate = aws.Time(until)
			}
			if bypass {
				in.BypassGovernanceRetention = aws.Bool(true)
			}
			_, err := c.PutObjectRetention(ctx, in)
			return err
		}
		if err := setRet(types.ObjectLockRetentionModeGovernance, later, false); err != nil {
			t.Fatalf("lengthening: %v", err)
		}
		mustCode(t, "shortening without bypass", setRet(types.ObjectLockRetentionModeGovernance, soon, false), "AccessDenied")
		mustCode(t, "a date in the past", setRet(types.ObjectLockRetentionModeGovernance, time.Now().Add(-time.Hour), true), "InvalidArgument")
		if err := setRet(types.ObjectLockRetentionModeGovernance, soon, true); err != nil {
			t.Fatalf("shortening with bypass: %v", err)
		}
		r, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("gov"), VersionId: aws.String(vid)})
		if err != nil || !aws.ToTime(r.Retention.RetainUntilDate).Equal(soon) {
			t.Fatalf("retention after shortening: %v %+v", err, r)
		}
		if err := deleteVersion(c, b, "gov", vid, true); err != nil {
			t.Fatalf("deleting with bypass: %v", err)
		}
		if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("gov"), VersionId: aws.String(vid)}); err == nil {
			t.Fatal("the version is still there")
		}
	})

	t.Run("compliance", func(t *testing.T) {
		vid := putLocked(t, c, b, "comp", types.ObjectLockModeCompliance, soon, false)
		mustCode(t, "deleting a COMPLIANCE version", deleteVersion(c, b, "comp", vid, false), "AccessDenied")
		mustCode(t, "deleting a COMPLIANCE version with bypass", deleteVersion(c, b, "comp", vid, true), "AccessDenied")
		setRet := func(r *types.ObjectLockRetention) error {
			_, err := c.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("comp"),
				Retention: r, BypassGovernanceRetention: aws.Bool(true)})
			return err
		}
		mustCode(t, "shortening COMPLIANCE", setRet(&types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance,
			RetainUntilDate: aws.Time(soon.Add(-time.Minute))}), "AccessDenied")
		mustCode(t, "COMPLIANCE to GOVERNANCE", setRet(&types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeGovernance,
			RetainUntilDate: aws.Time(later)}), "AccessDenied")
		mustCode(t, "removing COMPLIANCE", setRet(&types.ObjectLockRetention{}), "AccessDenied")
		if err := setRet(&types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(later)}); err != nil {
			t.Fatalf("lengthening COMPLIANCE: %v", err)
		}
		del, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: aws.String(b), BypassGovernanceRetention: aws.Bool(true),
			Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("comp"), VersionId: aws.String(vid)}}}})
		if err != nil || len(del.Errors) != 1 || aws.ToString(del.Errors[0].Code) != "AccessDenied" {
			t.Fatalf("DeleteObjects of a COMPLIANCE version with bypass: %v %+v", err, del)
		}
		r, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("comp")})
		if err != nil || r.Retention.Mode != types.ObjectLockRetentionModeCompliance || !aws.ToTime(r.Retention.RetainUntilDate).Equal(later) {
			t.Fatalf("retention: %v %+v", err, r)
		}
	})

	t.Run("legal hold", func(t *testing.T) {
		vid := putLocked(t, c, b, "held", "", time.Time{}, true)
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("held")})
		if err != nil || h.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn || h.ObjectLockMode != "" {
			t.Fatalf("HEAD: %v %+v", err, h)
		}
		mustCode(t, "deleting a held version with bypass", deleteVersion(c, b, "held", vid, true), "AccessDenied")
		hold := func(s types.ObjectLockLegalHoldStatus) error {
			_, err := c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("held"), VersionId: aws.String(vid),
				LegalHold: &types.ObjectLockLegalHold{Status: s}})
			return err
		}
		mustCode(t, "a legal hold of MAYBE", hold("MAYBE"), "MalformedXML")
		if err := hold(types.ObjectLockLegalHoldStatusOff); err != nil {
			t.Fatal(err)
		}
		lh, err := c.GetObjectLegalHold(ctx, &awss3.GetObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("held"), VersionId: aws.String(vid)})
		if err != nil || lh.LegalHold.Status != types.ObjectLockLegalHoldStatusOff {
			t.Fatalf("GetObjectLegalHold: %v %+v", err, lh)
		}
		// A hold on a version with a GOVERNANCE retention keeps it even
		// from a bypass; once off, the bypass deletes it.
		vid2 := putLocked(t, c, b, "held2", types.ObjectLockModeGovernance, soon, false)
		if _, err := c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("held2"),
			LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}}); err != nil {
			t.Fatal(err)
		}
		r, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("held2")})
		if err != nil || r.Retention.Mode != types.ObjectLockRetentionModeGovernance {
			t.Fatalf("retention kept by a legal hold change: %v %+v", err, r)
		}
		mustCode(t, "deleting a held GOVERNANCE version with bypass", deleteVersion(c, b, "held2", vid2, true), "AccessDenied")
		if _, err := c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("held2"),
			LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOff}}); err != nil {
			t.Fatal(err)
		}
		if err := deleteVersion(c, b, "held2", vid2, true); err != nil {
			t.Fatalf("deleting once the hold is off: %v", err)
		}
		if err := deleteVersion(c, b, "held", vid, false); err != nil {
			t.Fatalf("deleting a version with its hold off: %v", err)
		}
		_, err = c.GetObjectLegalHold(ctx, &awss3.GetObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("held"), VersionId: aws.String(vid)})
		mustCode(t, "GetObjectLegalHold of a deleted version", err, "NoSuchVersion")
	})

	t.Run("copy and multipart", func(t *testing.T) {
		putLocked(t, c, b, "src", "", time.Time{}, false)
		cp, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String(b), Key: aws.String("copied"), CopySource: aws.String(b + "/src"),
			ObjectLockMode: types.ObjectLockModeGovernance, ObjectLockRetainUntilDate: aws.Time(soon), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String(b), Key: aws.String("copied"), VersionId: cp.VersionId})
		if err != nil || h.ObjectLockMode != types.ObjectLockModeGovernance || h.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn {
			t.Fatalf("HEAD of a locked copy: %v %+v", err, h)
		}
		mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"),
			ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: aws.Time(soon)})
		if err != nil {
			t.Fatal(err)
		}
		up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: mp.UploadId,
			PartNumber: aws.Int32(1), Body: strings.NewReader("part")})
		if err != nil {
			t.Fatal(err)
		}
		done, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(b), Key: aws.String("mp"), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: up.ETag}}}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String(b), Key: aws.String("mp")})
		if err != nil || r.Retention.Mode != types.ObjectLockRetentionModeCompliance {
			t.Fatalf("retention of a multipart object: %v %+v", err, r)
		}
		mustCode(t, "deleting a multipart COMPLIANCE version", deleteVersion(c, b, "mp", aws.ToString(done.VersionId), true), "AccessDenied")
	})

	t.Run("presigned", func(t *testing.T) {
		// Lock parameters in a presigned URL's query lock the version as
		// headers do.
		req, err := http.NewRequest("PUT", e.srv.URL+"/"+b+"/presigned?x-amz-object-lock-legal-hold=ON&X-Amz-Expires=900", strings.NewReader("data"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-MD5", base64.StdEncoding.EncodeToString(md5sum("data")))
		creds := aws.Credentials{AccessKeyID: e.admin.ID, SecretAccessKey: e.admin.Secret}
		u, hdr, err := v4.NewSigner().PresignHTTP(ctx, creds, req, "UNSIGNED-PAYLOAD", "s3", "us-east-1", time.Now(), noDoubleEscape)
		if err != nil {
			t.Fatal(err)
		}
		put, _ := http.NewRequest("PUT", u, strings.NewReader("data"))
		put.Header = hdr
		resp, err := http.DefaultClient.Do(put)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("presigned PUT with a legal hold: %d", resp.StatusCode)
		}
		lh, err := c.GetObjectLegalHold(ctx, &awss3.GetObjectLegalHoldInput{Bucket: aws.String(b), Key: aws.String("presigned")})
		if err != nil || lh.LegalHold.Status != types.ObjectLockLegalHoldStatusOn {
			t.Fatalf("legal hold of a presigned PUT: %v %+v", err, lh)
		}
	})

	t.Run("bad headers", func(t *testing.T) {
		for _, tc := range []struct {
			hdr  []string
			code string
		}{
			{[]string{"x-amz-object-lock-mode", "GOVERNANCE"}, "InvalidArgument"},
			{[]string{"x-amz-object-lock-retain-until-date", soon.Format(time.RFC3339)}, "InvalidArgument"},
			{[]string{"x-amz-object-lock-mode", "FOREVER", "x-amz-object-lock-retain-until-date", soon.Format(time.RFC3339)}, "InvalidArgument"},
			{[]string{"x-amz-object-lock-mode", "GOVERNANCE", "x-amz-object-lock-retain-until-date", "tomorrow"}, "InvalidArgument"},
			{[]string{"x-amz-object-lock-mode", "GOVERNANCE", "x-amz-object-lock-retain-until-date", time.Now().Add(-time.Hour).Format(time.RFC3339)}, "InvalidArgument"},
			{[]string{"x-amz-object-lock-legal-hold", "MAYBE"}, "InvalidArgument"},
		} {
			hdr := append([]string{"Content-MD5", base64.StdEncoding.EncodeToString(md5sum("x"))}, tc.hdr...)
			resp, body := e.do(t, e.admin, "PUT", "/"+b+"/bad", []byte("x"), hdr...)
			if resp.StatusCode != 400 || !strings.Contains(string(body), "<Code>"+tc.code+"</Code>") {
				t.Errorf("PUT with %v: %d %s, want %s", tc.hdr, resp.StatusCode, body, tc.code)
			}
		}
		resp, body := e.do(t, e.admin, "DELETE", "/"+b+"/src", nil, "x-amz-object-lock-mode", "GOVERNANCE")
		if resp.StatusCode != 400 || !strings.Contains(string(body), "InvalidArgument") {
			t.Errorf("DELETE with x-amz-object-lock-mode: %d %s", resp.StatusCode, body)
		}
		for _, doc := range []string{"<Retention><Mode>GOVERNANCE</Mode></Retention>", "<Retention><Mode>SOMETIMES</Mode><RetainUntilDate>" + soon.Format(time.RFC3339) + "</RetainUntilDate></Retention>",
			"<Retention><Mode>GOVERNANCE</Mode><RetainUntilDate>soon</RetainUntilDate></Retention>", "<Retention"} {
			resp, body := e.do(t, e.admin, "PUT", "/"+b+"/src?retention", []byte(doc), "Content-MD5", base64.StdEncoding.EncodeToString(md5sum(doc)))
			if resp.StatusCode != 400 || !strings.Contains(string(body), "MalformedXML") {
				t.Errorf("PutObjectRetention %s: %d %s", doc, resp.StatusCode, body)
			}
		}
	})
}

// TestObjectLockNeedsChecksum: a PUT that locks its object (its own
// retention or legal hold, or the bucket's default retention) must carry
// Content-MD5 or an x-amz-checksum, as S3 wants, or a signature that
// covers its body; one to an object lock bucket without a default
// retention need not.
func TestObjectLockNeedsChecksum(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	c := e.client(e.admin)
	lockBucket(t, c, "locksum")
	soon := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	put := func(key string, hdr ...string) (int, string) {
		resp, b := e.doHash(t, e.admin, "PUT", "/locksum/"+key, []byte("data"), "UNSIGNED-PAYLOAD", hdr...)
		return resp.StatusCode, string(b)
	}
	if st, b := put("plain"); st != 200 {
		t.Fatalf("PUT without lock or checksum: %d %s", st, b)
	}
	if st, b := put("held", "x-amz-object-lock-legal-hold", "ON"); st != 400 || !strings.Contains(b, "InvalidRequest") || !strings.Contains(b, "Content-MD5") {
		t.Fatalf("PUT with a legal hold, no checksum: %d %s", st, b)
	}
	if st, b := put("held", "x-amz-object-lock-legal-hold", "ON", "Content-MD5", base64.StdEncoding.EncodeToString(md5sum("data"))); st != 200 {
		t.Fatalf("PUT with a legal hold and Content-MD5: %d %s", st, b)
	}
	if st, b := put("ret", "x-amz-object-lock-mode", "GOVERNANCE", "x-amz-object-lock-retain-until-date", soon,
		"x-amz-checksum-crc32", "rfPzYw=="); st != 200 {
		t.Fatalf("PUT with a retention and x-amz-checksum-crc32: %d %s", st, b)
	}
	if _, err := c.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: aws.String("locksum"),
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	if st, b := put("plain"); st != 400 || !strings.Contains(b, "InvalidRequest") {
		t.Fatalf("PUT under a default retention, no checksum: %d %s", st, b)
	}
	if resp, b := e.do(t, e.admin, "PUT", "/locksum/signed", []byte("data")); resp.StatusCode != 200 {
		t.Fatalf("PUT under a default retention, its SHA-256 signed: %d %s", resp.StatusCode, b)
	}
	// aws-sdk-go-v2 sends a checksum with every PUT.
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("locksum"), Key: aws.String("sdk"), Body: strings.NewReader("data")}); err != nil {
		t.Fatal(err)
	}
}

// TestObjectLockPolicyBypass: x-amz-bypass-governance-retention works
// for a key that owns the bucket or that a bucket policy allows
// s3:BypassGovernanceRetention, not for one that may only write.
func TestObjectLockPolicyBypass(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	owner := e.key(t, false)
	oc := e.client(owner)
	lockBucket(t, oc, "lockpol")
	writer, err := e.gw.CreateKey(ctx, false, map[string]gateway.Perm{"lockpol": gateway.Write})
	if err != nil {
		t.Fatal(err)
	}
	wc := e.client(writer)
	soon := time.Now().Add(time.Hour)
	v1 := putLocked(t, wc, "lockpol", "a", types.ObjectLockModeGovernance, soon, false)
	v2 := putLocked(t, wc, "lockpol", "b", types.ObjectLockModeGovernance, soon, false)
	mustCode(t, "a writer's bypass", deleteVersion(wc, "lockpol", "a", v1, true), "AccessDenied")
	_, err = wc.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: aws.String("lockpol"), Key: aws.String("a"),
		Retention: &types.ObjectLockRetention{}, BypassGovernanceRetention: aws.Bool(true)})
	mustCode(t, "a writer's removal of GOVERNANCE with bypass", err, "AccessDenied")
	if err := deleteVersion(oc, "lockpol", "a", v1, true); err != nil {
		t.Fatalf("the owner's bypass: %v", err)
	}
	id := gateway.KeyIdentity(writer).ID
	doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"` + id + `"},"Action":"s3:BypassGovernanceRetention","Resource":"arn:aws:s3:::lockpol/*"}]}`
	if _, err := oc.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: aws.String("lockpol"), Policy: aws.String(doc)}); err != nil {
		t.Fatal(err)
	}
	mustCode(t, "a writer allowed to bypass, without the header", deleteVersion(wc, "lockpol", "b", v2, false), "AccessDenied")
	if err := deleteVersion(wc, "lockpol", "b", v2, true); err != nil {
		t.Fatalf("a writer the policy allows to bypass: %v", err)
	}
}

// TestObjectLockLifecycle: a lifecycle rule expiring noncurrent versions
// leaves locked ones (the sweep reports no error) and removes the rest.
func TestObjectLockLifecycle(t *testing.T) {
	fake := clockwork.NewFakeClockAt(time.Now())
	e := newEnvWith(t, testgrid.Options{Nodes: 3}, s3.Options{Clock: fake, LifecycleEvery: time.Hour})
	c := e.client(e.admin)
	ctx := context.Background()
	lockBucket(t, c, "locklc")
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: aws.String("locklc"),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{ID: aws.String("nc"), Status: types.ExpirationStatusEnabled,
			Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}, NoncurrentVersionExpiration: &types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}}}}}); err != nil {
		t.Fatal(err)
	}
	locked := putLocked(t, c, "locklc", "k", types.ObjectLockModeCompliance, time.Now().Add(time.Hour), false)
	free := putLocked(t, c, "locklc", "k", "", time.Time{}, false)
	putLocked(t, c, "locklc", "k", "", time.Time{}, false)
	fake.Advance(3 * 24 * time.Hour)
	if err := e.s3.SweepLifecycle(ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("locklc"), Key: aws.String("k"), VersionId: aws.String(locked)}); err != nil {
		t.Fatalf("the locked noncurrent version: %v", err)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("locklc"), Key: aws.String("k"), VersionId: aws.String(free)}); err == nil {
		t.Fatal("the unlocked noncurrent version was not expired")
	}
}

// TestObjectLockRestart: locks are kept with the versions in the grid:
// after the gateway restarts, and at another gateway sharing the
// registry, a locked version still cannot be deleted and its retention
// reads back.
func TestObjectLockRestart(t *testing.T) {
	ctx := context.Background()
	g := testgrid.New(t, testgrid.Options{Nodes: 3})
	open := func(dir string) (*gateway.Gateway, *httptest.Server) {
		t.Helper()
		gw, err := gateway.Open(ctx, gateway.Config{Dir: dir, Nodes: g.NodeClient(), Objects: g.Objects(object.Options{}), NoSync: true, SyncEvery: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s3.New(gw, s3.Options{}))
		return gw, srv
	}
	dir1 := t.TempDir()
	gw1, srv1 := open(dir1)
	admin, err := gw1.CreateKey(ctx, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	c1 := client(srv1.URL, admin.ID, admin.Secret)
	lockBucket(t, c1, "lockrs")
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	vid := putLocked(t, c1, "lockrs", "k", types.ObjectLockModeCompliance, until, true)
	srv1.Close()
	if err := gw1.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(what string, c *awss3.Client) {
		t.Helper()
		r, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: aws.String("lockrs"), Key: aws.String("k"), VersionId: aws.String(vid)})
		if err != nil || r.Retention.Mode != types.ObjectLockRetentionModeCompliance || !aws.ToTime(r.Retention.RetainUntilDate).Equal(until) {
			t.Fatalf("%s: retention %v %+v", what, err, r)
		}
		lh, err := c.GetObjectLegalHold(ctx, &awss3.GetObjectLegalHoldInput{Bucket: aws.String("lockrs"), Key: aws.String("k"), VersionId: aws.String(vid)})
		if err != nil || lh.LegalHold.Status != types.ObjectLockLegalHoldStatusOn {
			t.Fatalf("%s: legal hold %v %+v", what, err, lh)
		}
		mustCode(t, what+": deleting the locked version", deleteVersion(c, "lockrs", "k", vid, true), "AccessDenied")
		_, err = c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String("lockrs"),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
		mustCode(t, what+": suspending versioning", err, "InvalidBucketState")
	}
	gw1, srv1 = open(dir1)
	defer gw1.Close()
	defer srv1.Close()
	check("after a restart", client(srv1.URL, admin.ID, admin.Secret))

	reg, err := os.ReadFile(filepath.Join(dir1, "registry"))
	if err != nil {
		t.Fatal(err)
	}
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, "registry"), reg, 0o600); err != nil {
		t.Fatal(err)
	}
	gw2, srv2 := open(dir2)
	defer gw2.Close()
	defer srv2.Close()
	if err := gw2.SyncRegistry(ctx); err != nil {
		t.Fatal(err)
	}
	check("at another gateway", client(srv2.URL, admin.ID, admin.Secret))
}

// TestObjectLockHeadersNeedPermission: a GET or HEAD shows an object's
// retention only to a requester that may also GetObjectRetention, and its
// legal hold only to one that may GetObjectLegalHold, as S3 does.
func TestObjectLockHeadersNeedPermission(t *testing.T) {
	e := newEnv(t, 3)
	ctx := context.Background()
	owner := e.key(t, false)
	oc := e.client(owner)
	lockBucket(t, oc, "lockhdr")
	putLocked(t, oc, "lockhdr", "k", types.ObjectLockModeGovernance, time.Now().Add(time.Hour), true)
	reader, err := e.gw.CreateKey(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	rcl := e.client(reader)
	id := gateway.KeyIdentity(reader).ID
	allow := func(actions string) {
		t.Helper()
		doc := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"` + id + `"},"Action":[` + actions + `],"Resource":"arn:aws:s3:::lockhdr/*"}]}`
		if _, err := oc.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: aws.String("lockhdr"), Policy: aws.String(doc)}); err != nil {
			t.Fatal(err)
		}
	}
	head := func(c *awss3.Client) *awss3.HeadObjectOutput {
		t.Helper()
		out, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("lockhdr"), Key: aws.String("k")})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if o := head(oc); o.ObjectLockMode != types.ObjectLockModeGovernance || o.ObjectLockRetainUntilDate == nil || o.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn {
		t.Fatalf("the owner's HEAD: mode %q, until %v, hold %q", o.ObjectLockMode, o.ObjectLockRetainUntilDate, o.ObjectLockLegalHoldStatus)
	}
	allow(`"s3:GetObject"`)
	if o := head(rcl); o.ObjectLockMode != "" || o.ObjectLockRetainUntilDate != nil || o.ObjectLockLegalHoldStatus != "" {
		t.Errorf("a reader allowed only s3:GetObject sees mode %q, until %v, hold %q", o.ObjectLockMode, o.ObjectLockRetainUntilDate, o.ObjectLockLegalHoldStatus)
	}
	allow(`"s3:GetObject","s3:GetObjectRetention"`)
	if o := head(rcl); o.ObjectLockMode != types.ObjectLockModeGovernance || o.ObjectLockLegalHoldStatus != "" {
		t.Errorf("a reader allowed s3:GetObjectRetention: mode %q, hold %q; want the mode and no hold", o.ObjectLockMode, o.ObjectLockLegalHoldStatus)
	}
	allow(`"s3:GetObject","s3:GetObjectLegalHold"`)
	out, err := rcl.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("lockhdr"), Key: aws.String("k")})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	if out.ObjectLockMode != "" || out.ObjectLockLegalHoldStatus != types.ObjectLockLegalHoldStatusOn {
		t.Errorf("a reader allowed s3:GetObjectLegalHold, GET: mode %q, hold %q; want the hold and no mode", out.ObjectLockMode, out.ObjectLockLegalHoldStatus)
	}
}
