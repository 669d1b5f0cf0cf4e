package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"hash/crc64"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

func b64crc32(b []byte) string {
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(b)))
}

func b64crc64nvme(b []byte) string {
	t := crc64.MakeTable(0x9a6c9329ac4bc9b5)
	return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, crc64.Checksum(b, t)))
}

// TestChecksums stores x-amz-checksum-* with objects and parts, returns
// them with x-amz-checksum-mode ENABLED, and refuses a body whose
// checksum (header or aws-chunked trailer) differs, storing nothing.
func TestChecksums(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	c := e.client(e.admin)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("sums")}); err != nil {
		t.Fatal(err)
	}
	body := []byte("the quick brown fox")

	// The SDK computes the checksum; the object keeps it.
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c,
		types.ChecksumAlgorithmCrc64nvme, types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256} {
		key := "obj-" + string(alg)
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String(key),
			Body: bytes.NewReader(body), ChecksumAlgorithm: alg}); err != nil {
			t.Fatalf("put %s: %v", alg, err)
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		got := map[types.ChecksumAlgorithm]*string{types.ChecksumAlgorithmCrc32: h.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: h.ChecksumCRC32C,
			types.ChecksumAlgorithmCrc64nvme: h.ChecksumCRC64NVME, types.ChecksumAlgorithmSha1: h.ChecksumSHA1, types.ChecksumAlgorithmSha256: h.ChecksumSHA256}[alg]
		if got == nil || *got == "" || h.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("head %s: checksum %v type %q", alg, got, h.ChecksumType)
		}
		if alg == types.ChecksumAlgorithmCrc32 && *got != b64crc32(body) {
			t.Fatalf("crc32 %s, want %s", *got, b64crc32(body))
		}
		g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("sums"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		_, err = buf.ReadFrom(g.Body) // the SDK checks the body against the header
		g.Body.Close()
		if err != nil || buf.String() != string(body) {
			t.Fatalf("get %s: %v %q", alg, err, buf.String())
		}
	}
	// Without x-amz-checksum-mode no checksum is sent.
	if h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("obj-CRC32")}); err != nil || h.ChecksumCRC32 != nil {
		t.Fatalf("head without mode: %v %v", err, h.ChecksumCRC32)
	}

	// A wrong checksum: 400 BadDigest, nothing stored.
	_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("sums"), Key: aws.String("wrong"),
		Body: bytes.NewReader(body), ChecksumCRC32: aws.String(b64crc32([]byte("other")))})
	if code(err) != "BadDigest" {
		t.Fatalf("wrong crc32: %v", err)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("wrong")}); err == nil {
		t.Fatal("an object with a wrong checksum was stored")
	}

	// A body that names no checksum gets CRC64NVME, as on S3.
	resp, _ := e.do(t, e.admin, "PUT", "/sums/plain", body)
	if resp.StatusCode != 200 || resp.Header.Get("x-amz-checksum-crc64nvme") != b64crc64nvme(body) {
		t.Fatalf("plain put: %d %q", resp.StatusCode, resp.Header.Get("x-amz-checksum-crc64nvme"))
	}
	resp, _ = e.do(t, e.admin, "HEAD", "/sums/plain", nil, "x-amz-checksum-mode", "ENABLED")
	if resp.Header.Get("x-amz-checksum-crc64nvme") != b64crc64nvme(body) {
		t.Fatalf("plain head: %v", resp.Header)
	}
	// A range gets no checksum.
	resp, _ = e.do(t, e.admin, "GET", "/sums/plain", nil, "x-amz-checksum-mode", "ENABLED", "Range", "bytes=0-3")
	if resp.StatusCode != 206 || resp.Header.Get("x-amz-checksum-crc64nvme") != "" {
		t.Fatalf("ranged get: %d %v", resp.StatusCode, resp.Header)
	}
	// x-amz-checksum-algorithm alone (minio-go's PutObject with trailing
	// headers enabled sends it so) names the checksum to compute.
	resp, _ = e.do(t, e.admin, "PUT", "/sums/named", body, "x-amz-checksum-algorithm", "CRC32")
	if resp.StatusCode != 200 || resp.Header.Get("x-amz-checksum-crc32") != b64crc32(body) || resp.Header.Get("x-amz-checksum-crc64nvme") != "" {
		t.Fatalf("put naming an algorithm: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = e.do(t, e.admin, "HEAD", "/sums/named", nil, "x-amz-checksum-mode", "ENABLED")
	if resp.Header.Get("x-amz-checksum-crc32") != b64crc32(body) {
		t.Fatalf("head of a put naming an algorithm: %v", resp.Header)
	}

	// aws-chunked with an unsigned trailer: checked before the answer.
	chunked := func(key, trailerValue string) (int, string) {
		var b bytes.Buffer
		fmt.Fprintf(&b, "%x\r\n%s\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n", len(body), body, trailerValue)
		conn := e.raw(t, e.admin, "PUT", "/sums/"+key, "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
			[]string{"Content-Encoding", "aws-chunked", "X-Amz-Decoded-Content-Length", fmt.Sprint(len(body)),
				"X-Amz-Trailer", "x-amz-checksum-crc32", "Content-Length", fmt.Sprint(b.Len())}, b.Bytes())
		resp, rb := answer(t, conn)
		return resp.StatusCode, string(rb)
	}
	if st, rb := chunked("trailed", b64crc32(body)); st != 200 {
		t.Fatalf("trailer put: %d %s", st, rb)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("trailed"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC32) != b64crc32(body) {
		t.Fatalf("trailed head: %v %v", err, aws.ToString(h.ChecksumCRC32))
	}
	if st, rb := chunked("trailed-wrong", b64crc32([]byte("other"))); st != 400 || !strings.Contains(rb, "BadDigest") {
		t.Fatalf("wrong trailer: %d %s", st, rb)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("sums"), Key: aws.String("trailed-wrong")}); err == nil {
		t.Fatal("an object with a wrong trailer checksum was stored")
	}
}

// TestMultipartChecksums: COMPOSITE (CRC32, SHA256) and FULL_OBJECT
// (CRC64NVME) checksums of multipart objects, from the parts'.
func TestMultipartChecksums(t *testing.T) {
	e := newEnv(t, 5)
	ctx := context.Background()
	c := e.client(e.admin)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("mpu")}); err != nil {
		t.Fatal(err)
	}
	p1 := bytes.Repeat([]byte("a"), 5<<20)
	p2 := []byte("tail")
	whole := append(append([]byte{}, p1...), p2...)
	upload := func(key string, alg types.ChecksumAlgorithm, typ types.ChecksumType, whole ...string) *awss3.CompleteMultipartUploadOutput {
		t.Helper()
		cu, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("mpu"), Key: aws.String(key),
			ChecksumAlgorithm: alg, ChecksumType: typ})
		if err != nil {
			t.Fatal(err)
		}
		var parts []types.CompletedPart
		for i, p := range [][]byte{p1, p2} {
			up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("mpu"), Key: aws.String(key), UploadId: cu.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p), ChecksumAlgorithm: alg})
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag,
				ChecksumCRC32: up.ChecksumCRC32, ChecksumSHA256: up.ChecksumSHA256, ChecksumCRC64NVME: up.ChecksumCRC64NVME})
		}
		in := &awss3.CompleteMultipartUploadInput{Bucket: aws.String("mpu"), Key: aws.String(key),
			UploadId: cu.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}
		if len(whole) > 0 {
			// A whole-object checksum the client computed; a wrong one
			// first, which completes nothing.
			in.ChecksumType, in.ChecksumCRC64NVME = typ, aws.String(b64crc64nvme([]byte("other")))
			if _, err := c.CompleteMultipartUpload(ctx, in); code(err) != "BadDigest" {
				t.Fatalf("complete with a wrong whole-object checksum: %v", err)
			}
			if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("mpu"), Key: aws.String(key)}); err == nil {
				t.Fatal("completed with a wrong whole-object checksum")
			}
			in.ChecksumCRC64NVME = aws.String(whole[0])
		}
		out, err := c.CompleteMultipartUpload(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	out := upload("crc32", types.ChecksumAlgorithmCrc32, "")
	var raw []byte
	for _, p := range [][]byte{p1, p2} {
		raw = binary.BigEndian.AppendUint32(raw, crc32.ChecksumIEEE(p))
	}
	want := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(raw))) + "-2"
	if aws.ToString(out.ChecksumCRC32) != want || out.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("complete crc32: %q %q, want %q", aws.ToString(out.ChecksumCRC32), out.ChecksumType, want)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("mpu"), Key: aws.String("crc32"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC32) != want {
		t.Fatalf("head crc32: %v %q", err, aws.ToString(h.ChecksumCRC32))
	}

	out = upload("sha256", types.ChecksumAlgorithmSha256, "")
	s1, s2 := sha256.Sum256(p1), sha256.Sum256(p2)
	ss := sha256.Sum256(append(s1[:], s2[:]...))
	if want := base64.StdEncoding.EncodeToString(ss[:]) + "-2"; aws.ToString(out.ChecksumSHA256) != want {
		t.Fatalf("complete sha256: %q, want %q", aws.ToString(out.ChecksumSHA256), want)
	}

	out = upload("crc64", types.ChecksumAlgorithmCrc64nvme, types.ChecksumTypeFullObject, b64crc64nvme(whole))
	if aws.ToString(out.ChecksumCRC64NVME) != b64crc64nvme(whole) || out.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("complete crc64nvme: %q %q, want %q", aws.ToString(out.ChecksumCRC64NVME), out.ChecksumType, b64crc64nvme(whole))
	}

	// A copy keeps a FULL_OBJECT checksum; a COMPOSITE one describes
	// parts, and the copy gets the whole object's of the same algorithm.
	for src, want := range map[string][2]string{"crc64": {b64crc64nvme(whole), ""}, "crc32": {"", b64crc32(whole)}} {
		if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("mpu"), Key: aws.String("copy-" + src),
			CopySource: aws.String("mpu/" + src)}); err != nil {
			t.Fatal(err)
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("mpu"), Key: aws.String("copy-" + src), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || aws.ToString(h.ChecksumCRC64NVME) != want[0] || aws.ToString(h.ChecksumCRC32) != want[1] || h.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("copy of %s: %v %q %q %q", src, err, aws.ToString(h.ChecksumCRC64NVME), aws.ToString(h.ChecksumCRC32), h.ChecksumType)
		}
	}

	// x-amz-checksum-algorithm on a copy gives it that algorithm's
	// checksum in place of the source's.
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("mpu"), Key: aws.String("copy-as-crc32"),
		CopySource: aws.String("mpu/crc64"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
		t.Fatal(err)
	}
	h, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("mpu"), Key: aws.String("copy-as-crc32"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC64NVME) != "" || aws.ToString(h.ChecksumCRC32) != b64crc32(whole) || h.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("copy with x-amz-checksum-algorithm: %v %q %q %q", err, aws.ToString(h.ChecksumCRC64NVME), aws.ToString(h.ChecksumCRC32), h.ChecksumType)
	}

	// S3's combinations only.
	if _, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("mpu"), Key: aws.String("x"),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeFullObject}); code(err) != "InvalidRequest" {
		t.Fatalf("sha256 full object: %v", err)
	}
}

// TestChecksumsNewer: SHA512, MD5 and XXHASH64, XXHASH3 and XXHASH128
// are computed and checked like the other five (the SDK's trailer,
// headers, multipart COMPOSITE, a copy); an algorithm the gateway does
// not compute is refused, never accepted unchecked.
func TestChecksumsNewer(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	c := e.client(e.admin)
	b := aws.String("newsums")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	body := []byte("the quick brown fox")
	s512 := sha512.Sum512(body)
	m5 := md5.Sum(body)
	want := map[types.ChecksumAlgorithm]string{types.ChecksumAlgorithmSha512: base64.StdEncoding.EncodeToString(s512[:]),
		types.ChecksumAlgorithmMd5: base64.StdEncoding.EncodeToString(m5[:])}
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmSha512, types.ChecksumAlgorithmMd5} {
		key := aws.String("obj-" + string(alg))
		in := &awss3.PutObjectInput{Bucket: b, Key: key, Body: bytes.NewReader(body)}
		if alg == types.ChecksumAlgorithmSha512 {
			in.ChecksumAlgorithm = alg // the SDK computes it and sends it in a trailer
		} else {
			in.ChecksumMD5 = aws.String(want[alg])
		}
		if _, err := c.PutObject(ctx, in); err != nil {
			t.Fatalf("put %s: %v", alg, err)
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		got := map[types.ChecksumAlgorithm]*string{types.ChecksumAlgorithmSha512: h.ChecksumSHA512, types.ChecksumAlgorithmMd5: h.ChecksumMD5}[alg]
		if aws.ToString(got) != want[alg] {
			t.Errorf("head %s: %q, want %q", alg, aws.ToString(got), want[alg])
		}
		hdr := "x-amz-checksum-" + strings.ToLower(string(alg))
		resp, rb := e.do(t, e.admin, "PUT", "/newsums/wrong", body, hdr, "AAAA"+want[alg][4:])
		if resp.StatusCode != 400 || !strings.Contains(string(rb), "BadDigest") {
			t.Errorf("wrong %s: %d %s", hdr, resp.StatusCode, rb)
		}
	}
	// A multipart upload with SHA512 parts: COMPOSITE.
	mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp"), ChecksumAlgorithm: types.ChecksumAlgorithmSha512})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmSha512})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(p.ChecksumSHA512) != want[types.ChecksumAlgorithmSha512] {
		t.Errorf("part sha512 %q", aws.ToString(p.ChecksumSHA512))
	}
	done, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("mp"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag, ChecksumSHA512: p.ChecksumSHA512}}}})
	if err != nil {
		t.Fatal(err)
	}
	inner := sha512.Sum512(s512[:])
	if w := base64.StdEncoding.EncodeToString(inner[:]) + "-1"; aws.ToString(done.ChecksumSHA512) != w || done.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("completed: %q %q, want %q COMPOSITE", aws.ToString(done.ChecksumSHA512), done.ChecksumType, w)
	}
	// A part read by number, with its own checksum.
	pg, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("mp"), PartNumber: aws.Int32(1), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	pg.Body.Close()
	if aws.ToString(pg.ChecksumSHA512) != want[types.ChecksumAlgorithmSha512] {
		t.Errorf("part 1's sha512: %q", aws.ToString(pg.ChecksumSHA512))
	}
	// The copy of a COMPOSITE object gets the whole object's checksum of
	// the same algorithm.
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: aws.String("mp-copy"), CopySource: aws.String("newsums/mp")}); err != nil {
		t.Fatal(err)
	}
	if h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("mp-copy"), ChecksumMode: types.ChecksumModeEnabled}); err != nil ||
		aws.ToString(h.ChecksumSHA512) != want[types.ChecksumAlgorithmSha512] || h.ChecksumType != types.ChecksumTypeFullObject {
		t.Errorf("copy of a COMPOSITE object: %v %q %v", aws.ToString(h.ChecksumSHA512), h.ChecksumType, err)
	}

	// The XXHASH family, in headers (the SDK does not compute them).
	x64 := xxhash.Sum64(body)
	x3 := xxh3.Hash(body)
	x128 := xxh3.Hash128(body).Bytes()
	for _, hv := range [][2]string{
		{"x-amz-checksum-xxhash64", base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, x64))},
		{"x-amz-checksum-xxhash3", base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint64(nil, x3))},
		{"x-amz-checksum-xxhash128", base64.StdEncoding.EncodeToString(x128[:])},
	} {
		if resp, rb := e.do(t, e.admin, "PUT", "/newsums/"+hv[0], body, hv[0], hv[1]); resp.StatusCode != 200 || resp.Header.Get(hv[0]) != hv[1] {
			t.Errorf("%s: %d %s %v", hv[0], resp.StatusCode, rb, resp.Header)
		}
		if resp, rb := e.do(t, e.admin, "PUT", "/newsums/wrong", body, hv[0], "AAAAAAAAAAA="+hv[1][12:]); resp.StatusCode != 400 || !strings.Contains(string(rb), "BadDigest") {
			t.Errorf("wrong %s: %d %s", hv[0], resp.StatusCode, rb)
		}
	}

	// Algorithms not computed are refused, and nothing is stored.
	for _, hdr := range [][]string{{"x-amz-checksum-blake3", "AAAAAAAAAAA="}, {"x-amz-checksum-algorithm", "BLAKE3"}} {
		resp, rb := e.do(t, e.admin, "PUT", "/newsums/xx", body, hdr...)
		if resp.StatusCode != 501 || !strings.Contains(string(rb), "is not implemented") {
			t.Errorf("%s: %d %s", hdr[0], resp.StatusCode, rb)
		}
	}
	if resp, rb := e.do(t, e.admin, "POST", "/newsums/xx?uploads", nil, "x-amz-checksum-algorithm", "BLAKE3"); resp.StatusCode != 501 {
		t.Errorf("multipart BLAKE3: %d %s", resp.StatusCode, rb)
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("xx")}); code(err) != "NotFound" {
		t.Errorf("a refused put stored something: %v", err)
	}
}
