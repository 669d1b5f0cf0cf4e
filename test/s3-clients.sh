#!/usr/bin/env bash
# Real S3 clients against `quilt up` (10 nodes and the gateway, on
# 127.0.0.1): awscli (s3 mb/cp/ls/sync/rm, s3api, versioning, Object Lock,
# ACLs and policies with an anonymous curl GET), boto3 (Signature V4 and V2),
# rclone (copy, check and sync of a tree of 1,000 files) and s3cmd (V4 and
# V2), then headless
# Chromium (test/s3-browser: presigned POST uploads, CORS). Installs what it
# needs: pinned awscli, boto3 and s3cmd in a venv under ~/.cache, rclone with
# apt. Fails if a
# client cannot be installed: nothing is skipped.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n== %s\n' "$*"; }

# Pinned client versions (awscli 1.46 carries its own botocore; boto3's
# is pinned with it). The venv's name holds them, so a change of pins
# makes a new venv rather than reusing an old one.
awscli_version=1.46.3 boto3_version=1.44.8 botocore_version=1.44.8 s3cmd_version=2.4.0
venv=${QUILT_CLIENTS_VENV:-$HOME/.cache/quilt-test/s3-clients-awscli$awscli_version-boto3$boto3_version-s3cmd$s3cmd_version}
if ! [ -x "$venv/bin/aws" ] || ! [ -x "$venv/bin/s3cmd" ] || ! "$venv/bin/python" -c 'import boto3' 2>/dev/null; then
	say "installing awscli $awscli_version, boto3 $boto3_version and s3cmd $s3cmd_version in $venv"
	python3 -m venv "$venv"
	"$venv/bin/pip" install -q "awscli==$awscli_version" "boto3==$boto3_version" "botocore==$botocore_version" "s3cmd==$s3cmd_version"
fi
if ! command -v rclone >/dev/null; then
	say "installing rclone"
	if [ "$(id -u)" = 0 ]; then apt-get install -y -qq rclone >/dev/null || { apt-get update -qq && apt-get install -y -qq rclone >/dev/null; }
	else sudo apt-get install -y -qq rclone >/dev/null; fi
fi
aws="$venv/bin/aws"

say "starting quilt up"
# QUILT_BIN: a quilt binary built before (make test passes its own).
if [ -n "${QUILT_BIN:-}" ]; then cp "$QUILT_BIN" "$work/quilt"; else
	(cd "$root" && go build -o "$work/quilt" ./cmd/quilt)
fi
QUILT_HOME="$work/home" "$work/quilt" up --port 0 --no-fsync >"$work/up.log" 2>&1 &
pid=$!
env="$work/home/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up.log"; echo "quilt up did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
unset AWS_CA_BUNDLE REQUESTS_CA_BUNDLE; export AWS_PAGER=

say "awscli"
head -c 3000000 /dev/urandom >"$work/big"
echo "small object" >"$work/small"
"$aws" s3 mb s3://cli
"$aws" s3 cp "$work/big" s3://cli/data/big --only-show-errors
"$aws" s3 cp "$work/small" s3://cli/data/small --only-show-errors
"$aws" s3 cp s3://cli/data/big "$work/big.back" --only-show-errors
cmp "$work/big" "$work/big.back"
# Output is captured before it is matched: under pipefail, grep -q
# exiting at the first match would kill the client with a broken pipe.
out=$("$aws" s3 ls s3://cli/data/)
grep -q ' big$' <<<"$out"
# Over 8 MiB awscli uploads in parts (multipart) and downloads in ranges.
head -c 20000000 /dev/urandom >"$work/huge"
"$aws" s3 cp "$work/huge" s3://cli/data/huge --only-show-errors
"$aws" s3 cp s3://cli/data/huge "$work/huge.back" --only-show-errors
cmp "$work/huge" "$work/huge.back"
out=$("$aws" s3api head-object --bucket cli --key data/huge --query ETag --output text)
grep -q -- '-3"$' <<<"$out"
# A copy over 8 MiB is made in parts by UploadPartCopy (ranges of the
# source), then read back by part number.
"$aws" s3 cp s3://cli/data/huge s3://cli/data/huge-copy --only-show-errors
"$aws" s3 cp s3://cli/data/huge-copy "$work/huge.copy" --only-show-errors
cmp "$work/huge" "$work/huge.copy"
out=$("$aws" s3api head-object --bucket cli --key data/huge-copy --part-number 2 --query '[PartsCount,ContentLength]' --output text)
grep -q $'^3\t8388608$' <<<"$out"
out=$("$aws" s3api get-object-attributes --bucket cli --key data/huge-copy --object-attributes ObjectSize ObjectParts --query '[ObjectSize,ObjectParts.TotalPartsCount]' --output text)
test "$out" = $'20000000\t3'
up=$("$aws" s3api create-multipart-upload --bucket cli --key data/manual --query UploadId --output text)
"$aws" s3api upload-part --bucket cli --key data/manual --upload-id "$up" --part-number 1 --body "$work/small" >/dev/null
out=$("$aws" s3api list-parts --bucket cli --key data/manual --upload-id "$up" --query 'Parts[0].Size' --output text)
test "$out" = 13
"$aws" s3api abort-multipart-upload --bucket cli --key data/manual --upload-id "$up"
out=$("$aws" s3api head-object --bucket cli --key data/small --query ContentLength --output text)
test "$out" = 13
"$aws" s3api get-object --bucket cli --key data/big --range bytes=100-199 "$work/part" >/dev/null
cmp <(tail -c +101 "$work/big" | head -c 100) "$work/part"
mkdir -p "$work/tree/a/b"
for i in $(seq 1 50); do echo "cli $i" >"$work/tree/a/f$i"; echo "deep $i" >"$work/tree/a/b/g$i"; done
"$aws" s3 sync "$work/tree" s3://cli/tree --only-show-errors
out=$("$aws" s3 ls s3://cli/tree --recursive)
test "$(wc -l <<<"$out")" = 100
out=$("$aws" s3api list-object-versions --bucket cli --prefix data/ --query 'Versions[].[Key,VersionId,IsLatest]' --output text)
grep -q $'^data/big\tnull\tTrue$' <<<"$out"
out=$("$aws" s3api get-bucket-versioning --bucket cli --output text)
test -z "$out"
"$aws" s3api put-object-tagging --bucket cli --key data/small --tagging 'TagSet=[{Key=team,Value=blue}]' >/dev/null
out=$("$aws" s3api get-object-tagging --bucket cli --key data/small --query 'TagSet[0].Value' --output text)
test "$out" = blue
"$aws" s3api put-bucket-tagging --bucket cli --tagging 'TagSet=[{Key=env,Value=ci}]'
out=$("$aws" s3api get-bucket-tagging --bucket cli --query 'TagSet[0].Value' --output text)
test "$out" = ci
# CORS rules: set, read back, removed (the browser step checks them in
# Chromium).
"$aws" s3api put-bucket-cors --bucket cli --cors-configuration \
	'{"CORSRules":[{"AllowedOrigins":["https://app.example"],"AllowedMethods":["GET","PUT"],"AllowedHeaders":["*"],"MaxAgeSeconds":60}]}'
out=$("$aws" s3api get-bucket-cors --bucket cli --query 'CORSRules[0].AllowedOrigins[0]' --output text)
test "$out" = https://app.example
"$aws" s3api delete-bucket-cors --bucket cli
if "$aws" s3api get-bucket-cors --bucket cli >/dev/null 2>&1; then echo "CORS rules outlive delete-bucket-cors"; exit 1; fi
# ACLs and a bucket policy: an anonymous curl GET is allowed by the
# policy, and refused without it.
me=$("$aws" s3api list-buckets --query Owner.ID --output text)
"$aws" s3api put-bucket-acl --bucket cli --acl public-read
out=$("$aws" s3api get-bucket-acl --bucket cli --query 'Grants[?Grantee.URI==`http://acs.amazonaws.com/groups/global/AllUsers`].Permission' --output text)
test "$out" = READ
"$aws" s3api put-bucket-acl --bucket cli --grant-full-control "id=$me"
out=$("$aws" s3api get-bucket-acl --bucket cli --query '[Owner.ID,length(Grants)]' --output text)
test "$out" = "$me	1"
anon_get() { curl -s -o /dev/null -w '%{http_code}' "$AWS_ENDPOINT_URL/cli/data/small"; }
test "$(anon_get)" = 403
"$aws" s3api put-bucket-policy --bucket cli --policy '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cli/data/*"}]}'
out=$("$aws" s3api get-bucket-policy --bucket cli --query Policy --output text)
grep -q '"Principal":"\*"' <<<"$out"
out=$("$aws" s3api get-bucket-policy-status --bucket cli --query PolicyStatus.IsPublic --output text)
test "$out" = True
test "$(curl -s "$AWS_ENDPOINT_URL/cli/data/small")" = "small object"
"$aws" s3api delete-bucket-policy --bucket cli
test "$(anon_get)" = 403
if "$aws" s3api put-bucket-policy --bucket cli --policy '{"Statement":[{"Effect":"Allow"}]}' 2>"$work/err"; then echo "a malformed policy was taken"; exit 1; fi
grep -q MalformedPolicy "$work/err"
"$aws" s3api put-bucket-lifecycle-configuration --bucket cli --lifecycle-configuration \
	'{"Rules":[{"ID":"tmp","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":7}},{"ID":"uploads","Status":"Enabled","Filter":{},"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":2}}]}'
out=$("$aws" s3api get-bucket-lifecycle-configuration --bucket cli --query 'Rules[].[ID,Expiration.Days,AbortIncompleteMultipartUpload.DaysAfterInitiation]' --output text)
test "$out" = $'tmp\t7\tNone\nuploads\tNone\t2'
# One storage class: a transition is refused, not ignored.
if "$aws" s3api put-bucket-lifecycle-configuration --bucket cli --lifecycle-configuration \
	'{"Rules":[{"ID":"old","Status":"Enabled","Filter":{},"NoncurrentVersionTransitions":[{"NoncurrentDays":1,"StorageClass":"GLACIER"}]}]}' 2>/dev/null; then
	echo "NoncurrentVersionTransition accepted"; exit 1
fi
"$aws" s3api delete-bucket-lifecycle --bucket cli
if "$aws" s3api get-bucket-lifecycle-configuration --bucket cli >/dev/null 2>&1; then echo "lifecycle still there after delete"; exit 1; fi
# Versioning: two versions, the older read by its ID, a delete marker,
# the newer version deleted for good.
"$aws" s3 mb s3://ver
"$aws" s3api put-bucket-versioning --bucket ver --versioning-configuration Status=Enabled
out=$("$aws" s3api get-bucket-versioning --bucket ver --query Status --output text)
test "$out" = Enabled
echo one >"$work/v1"
echo two >"$work/v2"
v1=$("$aws" s3api put-object --bucket ver --key k --body "$work/v1" --query VersionId --output text)
v2=$("$aws" s3api put-object --bucket ver --key k --body "$work/v2" --query VersionId --output text)
"$aws" s3api get-object --bucket ver --key k --version-id "$v1" "$work/v1.back" >/dev/null
cmp "$work/v1" "$work/v1.back"
"$aws" s3 rm s3://ver/k --only-show-errors
out=$("$aws" s3api list-object-versions --bucket ver --query '[length(Versions), length(DeleteMarkers), DeleteMarkers[0].IsLatest]' --output text)
test "$out" = $'2\t1\tTrue'
"$aws" s3api delete-object --bucket ver --key k --version-id "$v2" >/dev/null
out=$("$aws" s3api list-object-versions --bucket ver --query 'Versions[].VersionId' --output text)
test "$out" = "$v1"
# Object Lock: a bucket made with it, a version under GOVERNANCE
# retention that a delete by version ID cannot remove, until bypassed.
"$aws" s3api create-bucket --bucket worm --object-lock-enabled-for-bucket >/dev/null
w1=$("$aws" s3api put-object --bucket worm --key k --body "$work/v1" --query VersionId --output text)
"$aws" s3api put-object-retention --bucket worm --key k --version-id "$w1" \
	--retention "Mode=GOVERNANCE,RetainUntilDate=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)"
out=$("$aws" s3api get-object-retention --bucket worm --key k --version-id "$w1" --query Retention.Mode --output text)
test "$out" = GOVERNANCE
if "$aws" s3api delete-object --bucket worm --key k --version-id "$w1" 2>"$work/err"; then echo "deleted a locked version"; exit 1; fi
grep -q AccessDenied "$work/err"
"$aws" s3api delete-object --bucket worm --key k --version-id "$w1" --bypass-governance-retention >/dev/null
"$aws" s3 rm s3://cli/data/big --only-show-errors
if "$aws" s3api head-object --bucket cli --key data/big >/dev/null 2>&1; then echo "data/big still there after s3 rm"; exit 1; fi
if "$aws" s3 rb s3://cli 2>/dev/null; then echo "removed a non-empty bucket"; exit 1; fi

say "boto3"
"$venv/bin/python" - <<'PY'
import os, boto3, botocore, botocore.config, urllib.request
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
s3.create_bucket(Bucket="boto")
body = os.urandom(200_000)
s3.put_object(Bucket="boto", Key="k/one", Body=body, Metadata={"who": "boto3"}, ContentType="application/x-test")
h = s3.head_object(Bucket="boto", Key="k/one")
assert h["Metadata"]["who"] == "boto3" and h["ContentType"] == "application/x-test", h
assert s3.get_object(Bucket="boto", Key="k/one")["Body"].read() == body
assert s3.get_object(Bucket="boto", Key="k/one", Range="bytes=10-19")["Body"].read() == body[10:20]
for i in range(7):
    s3.put_object(Bucket="boto", Key=f"many/{i}", Body=b"x")
pages = s3.get_paginator("list_objects_v2").paginate(Bucket="boto", Prefix="many/", PaginationConfig={"PageSize": 3})
assert [o["Key"] for p in pages for o in p.get("Contents", [])] == [f"many/{i}" for i in range(7)]
# SigV4 presigning (boto3 presigns S3 URLs with SigV2 query auth by
# default; the Signature V2 step below checks that).
s3v4 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=botocore.config.Config(signature_version="s3v4"))
url = s3v4.generate_presigned_url("get_object", Params={"Bucket": "boto", "Key": "k/one"}, ExpiresIn=60)
assert urllib.request.urlopen(url).read() == body
try:
    s3.get_object(Bucket="boto", Key="missing")
    raise SystemExit("missing key read")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "NoSuchKey", e.response
bad = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key="wrong")
try:
    bad.list_buckets()
    raise SystemExit("wrong secret accepted")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "SignatureDoesNotMatch", e.response
# Checksums: kept with the object and returned with ChecksumMode, a
# wrong one refused; a multipart upload with the SDK's default checksum
# gets one computed from its parts, which botocore checks on the GET.
import base64, hashlib, io, boto3.s3.transfer
s3.put_object(Bucket="boto", Key="sum/sha", Body=b"abc", ChecksumAlgorithm="SHA256")
h = s3.head_object(Bucket="boto", Key="sum/sha", ChecksumMode="ENABLED")
assert h["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(b"abc").digest()).decode(), h
try:
    s3.put_object(Bucket="boto", Key="sum/bad", Body=b"abc", ChecksumCRC32=base64.b64encode(b"\0\0\0\0").decode())
    raise SystemExit("wrong checksum accepted")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "BadDigest", e.response
big = os.urandom(12 << 20)
s3.upload_fileobj(io.BytesIO(big), "boto", "sum/multipart", Config=boto3.s3.transfer.TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
h = s3.head_object(Bucket="boto", Key="sum/multipart", ChecksumMode="ENABLED")
assert h["ETag"].endswith('-3"') and any(k.startswith("Checksum") and k != "ChecksumType" for k in h), h
assert s3.get_object(Bucket="boto", Key="sum/multipart", ChecksumMode="ENABLED")["Body"].read() == big
print("boto3 ok")
PY

say "boto3 with Signature V2 (signature_version='s3')"
"$venv/bin/python" - <<'PY'
import io, os, boto3, boto3.s3.transfer, botocore, botocore.config, urllib.request, urllib3
v2 = botocore.config.Config(signature_version="s3")
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=v2)
s3.create_bucket(Bucket="sigv2")
s3.put_object(Bucket="sigv2", Key="dir/a b+c", Body=b"signed v2", Metadata={"who": "v2"}, ContentType="text/x-v2")
h = s3.head_object(Bucket="sigv2", Key="dir/a b+c")
assert h["Metadata"]["who"] == "v2" and h["ContentType"] == "text/x-v2", h
assert s3.get_object(Bucket="sigv2", Key="dir/a b+c")["Body"].read() == b"signed v2"
s3.copy_object(Bucket="sigv2", Key="copy", CopySource={"Bucket": "sigv2", "Key": "dir/a b+c"})
assert [o["Key"] for o in s3.list_objects_v2(Bucket="sigv2")["Contents"]] == ["copy", "dir/a b+c"]
s3.put_object_tagging(Bucket="sigv2", Key="copy", Tagging={"TagSet": [{"Key": "t", "Value": "1"}]})
assert s3.get_object_tagging(Bucket="sigv2", Key="copy")["TagSet"] == [{"Key": "t", "Value": "1"}]
big = os.urandom(11 << 20)
s3.upload_fileobj(io.BytesIO(big), "sigv2", "big", Config=boto3.s3.transfer.TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
assert s3.get_object(Bucket="sigv2", Key="big")["Body"].read() == big
# Presigned with Signature V2 (AWSAccessKeyId, Expires, Signature).
url = s3.generate_presigned_url("get_object", Params={"Bucket": "sigv2", "Key": "dir/a b+c"}, ExpiresIn=60)
assert "AWSAccessKeyId=" in url and "Signature=" in url, url
assert urllib.request.urlopen(url).read() == b"signed v2"
try:
    urllib.request.urlopen(url.replace("/dir/", "/dix/"))
    raise SystemExit("a changed V2 presigned URL was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 403 and b"SignatureDoesNotMatch" in e.read()
url = s3.generate_presigned_url("get_object", Params={"Bucket": "sigv2", "Key": "copy"}, ExpiresIn=-10)
try:
    urllib.request.urlopen(url)
    raise SystemExit("an expired V2 presigned URL was accepted")
except urllib.error.HTTPError as e:
    assert e.code == 403 and b"expired" in e.read()
# A browser form signed with V2 (AWSAccessKeyId, policy, signature).
post = s3.generate_presigned_post("sigv2", "posted", Conditions=[["content-length-range", 1, 1000]], ExpiresIn=60)
assert "AWSAccessKeyId" in post["fields"] and "signature" in post["fields"], post
body, ctype = urllib3.encode_multipart_formdata(list(post["fields"].items()) + [("file", ("f.txt", b"form v2"))])
r = urllib3.request("POST", post["url"], body=body, headers={"Content-Type": ctype})
assert r.status == 204, (r.status, r.data)
assert s3.get_object(Bucket="sigv2", Key="posted")["Body"].read() == b"form v2"
for k in ("dir/a b+c", "copy", "big", "posted"):
    s3.delete_object(Bucket="sigv2", Key=k)
s3.delete_bucket(Bucket="sigv2")
bad = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"], aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"], aws_secret_access_key="wrong", config=v2)
try:
    bad.list_buckets()
    raise SystemExit("wrong secret accepted over V2")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "SignatureDoesNotMatch", e.response
print("boto3 Signature V2 ok")
PY

say "rclone: copy, check and sync of 1,000 files"
export RCLONE_CONFIG_Q_TYPE=s3 RCLONE_CONFIG_Q_PROVIDER=Other RCLONE_CONFIG_Q_ENDPOINT="$AWS_ENDPOINT_URL" \
	RCLONE_CONFIG_Q_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" RCLONE_CONFIG_Q_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
	RCLONE_CONFIG_Q_REGION=us-east-1 RCLONE_CONFIG_Q_FORCE_PATH_STYLE=true
mkdir -p "$work/rtree"
for d in $(seq 1 10); do
	mkdir -p "$work/rtree/d$d"
	for f in $(seq 1 100); do echo "rclone $d $f" >"$work/rtree/d$d/f$f"; done
done
rc() { env -u AWS_CA_BUNDLE rclone --transfers 8 --checkers 8 -q "$@"; }
rc mkdir q:rclone
rc copy "$work/rtree" q:rclone/tree
rc check "$work/rtree" q:rclone/tree
rm "$work/rtree/d1/f1" && echo changed >"$work/rtree/d2/f2"
rc sync "$work/rtree" q:rclone/tree
rc check "$work/rtree" q:rclone/tree
out=$(rc ls q:rclone/tree)
test "$(wc -l <<<"$out")" = 999

say "s3cmd"
hostport=${AWS_ENDPOINT_URL#http://}
# host_bucket without %(bucket)s: path-style requests.
printf '[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n' \
	"$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" "$hostport" "$hostport" >"$work/s3cfg"
s3c() { "$venv/bin/s3cmd" -c "$work/s3cfg" --no-progress "$@"; }
s3c mb s3://s3cmd
s3c put "$work/small" s3://s3cmd/small
# 12 MB in 5 MB parts: a multipart upload.
head -c 12000000 /dev/urandom >"$work/mid"
s3c put --multipart-chunk-size-mb=5 "$work/mid" s3://s3cmd/dir/mid
s3c get s3://s3cmd/dir/mid "$work/mid.back"
cmp "$work/mid" "$work/mid.back"
out=$(s3c ls --recursive s3://s3cmd)
grep -q 's3://s3cmd/dir/mid$' <<<"$out"
grep -q 's3://s3cmd/small$' <<<"$out"
out=$(s3c info s3://s3cmd/small)
grep -q 'File size: *13$' <<<"$out"
# s3cmd's setacl reads the object's ACL, edits it and puts it back.
s3c setacl --acl-public s3://s3cmd/small >/dev/null
test "$(curl -s "$AWS_ENDPOINT_URL/s3cmd/small")" = "small object"
out=$(s3c info s3://s3cmd/small)
grep -q 'ACL: *\*anon\*: READ$' <<<"$out"
s3c setacl --acl-private s3://s3cmd/small >/dev/null
test "$(curl -s -o /dev/null -w '%{http_code}' "$AWS_ENDPOINT_URL/s3cmd/small")" = 403
s3c sync "$work/tree/" s3://s3cmd/tree/ >/dev/null
out=$(s3c ls --recursive s3://s3cmd/tree/)
test "$(wc -l <<<"$out")" = 100
s3c cp s3://s3cmd/small s3://s3cmd/small-copy
s3c get s3://s3cmd/small-copy "$work/small.copy"
cmp "$work/small" "$work/small.copy"
# The same with Signature V2 (s3cmd signs x-amz-date, Date left empty).
s3c --signature-v2 put "$work/small" s3://s3cmd/v2/small
s3c --signature-v2 put --multipart-chunk-size-mb=5 "$work/mid" s3://s3cmd/v2/mid
s3c --signature-v2 get s3://s3cmd/v2/mid "$work/mid.v2"
cmp "$work/mid" "$work/mid.v2"
out=$(s3c --signature-v2 ls s3://s3cmd/v2/)
grep -q 's3://s3cmd/v2/small$' <<<"$out"
s3c --signature-v2 del s3://s3cmd/v2/small s3://s3cmd/v2/mid >/dev/null
if s3c rb s3://s3cmd 2>/dev/null; then echo "s3cmd removed a non-empty bucket"; exit 1; fi
s3c del --recursive --force s3://s3cmd >/dev/null
s3c rb s3://s3cmd
if s3c ls s3://s3cmd 2>/dev/null; then echo "s3cmd listed a removed bucket"; exit 1; fi

say "browser: presigned POST and CORS in headless Chromium (test/s3-browser)"
QUILT_PYTHON="$venv/bin/python" bash "$root/test/s3-browser/run.sh"

say "HTTPS: quilt up --s3-tls on, its own CA trusted by each client"
kill "$pid" && wait "$pid" 2>/dev/null || true
pid=
unset AWS_ENDPOINT_URL AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
QUILT_HOME="$work/home-tls" "$work/quilt" up --port 0 --no-fsync --s3-tls on >"$work/up-tls.log" 2>&1 &
pid=$!
env="$work/home-tls/grid/gateway/s3.env"
for _ in $(seq 1 120); do [ -s "$env" ] && break; sleep 0.5; done
[ -s "$env" ] || { cat "$work/up-tls.log"; echo "quilt up --s3-tls on did not start"; exit 1; }
# shellcheck disable=SC1090
. "$env"
grep -q '^https://' <<<"$AWS_ENDPOINT_URL"
test -s "$AWS_CA_BUNDLE"
# The banner with the CA's fingerprint comes once every front end is up,
# after s3.env is written.
for _ in $(seq 1 120); do grep -q 'SHA-256 ' "$work/up-tls.log" && break; sleep 0.5; done
grep -q 'SHA-256 ' "$work/up-tls.log" || { cat "$work/up-tls.log"; echo "quilt up --s3-tls on printed no CA fingerprint"; exit 1; }
"$aws" s3 mb s3://tls
"$aws" s3 cp "$work/small" s3://tls/small --only-show-errors
out=$("$aws" s3 ls s3://tls/)
grep -q ' small$' <<<"$out"
# Without the CA, the certificate is not trusted.
if env -u AWS_CA_BUNDLE "$aws" s3 ls s3://tls/ >/dev/null 2>&1; then echo "awscli trusted the gateway without its CA"; exit 1; fi
"$venv/bin/python" - <<'PY'
import os, boto3
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
s3.put_object(Bucket="tls", Key="boto", Body=b"over https")
assert s3.get_object(Bucket="tls", Key="boto")["Body"].read() == b"over https"
print("boto3 over https ok")
PY
# SSE-C, over HTTPS only: awscli (single and multipart uploads, a copy
# to another key) and boto3.
ssec=0123456789abcdef0123456789abcdef ssec2=fedcba9876543210fedcba9876543210
"$aws" s3 cp "$work/small" s3://tls/ssec-small --sse-c AES256 --sse-c-key "$ssec" --only-show-errors
"$aws" s3 cp "$work/huge" s3://tls/ssec-huge --sse-c AES256 --sse-c-key "$ssec" --only-show-errors
"$aws" s3 cp s3://tls/ssec-huge "$work/ssec.back" --sse-c AES256 --sse-c-key "$ssec" --only-show-errors
cmp "$work/huge" "$work/ssec.back"
if "$aws" s3 cp s3://tls/ssec-small "$work/ssec.nokey" --only-show-errors 2>/dev/null; then echo "awscli read an SSE-C object without its key"; exit 1; fi
if "$aws" s3 cp s3://tls/ssec-small "$work/ssec.wrong" --sse-c AES256 --sse-c-key "$ssec2" --only-show-errors 2>/dev/null; then echo "awscli read an SSE-C object with another key"; exit 1; fi
"$aws" s3 cp s3://tls/ssec-huge s3://tls/ssec-rekeyed --sse-c-copy-source AES256 --sse-c-copy-source-key "$ssec" --sse-c AES256 --sse-c-key "$ssec2" --only-show-errors
"$aws" s3 cp s3://tls/ssec-rekeyed "$work/ssec.rekeyed" --sse-c AES256 --sse-c-key "$ssec2" --only-show-errors
cmp "$work/huge" "$work/ssec.rekeyed"
"$venv/bin/python" - <<'PY'
import os, boto3, botocore
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
key, other = os.urandom(32), os.urandom(32)
s3.put_object(Bucket="tls", Key="boto-ssec", Body=b"customer key", SSECustomerAlgorithm="AES256", SSECustomerKey=key)
r = s3.get_object(Bucket="tls", Key="boto-ssec", SSECustomerAlgorithm="AES256", SSECustomerKey=key, Range="bytes=9-11")
assert r["Body"].read() == b"key" and r["SSECustomerAlgorithm"] == "AES256", r
for kw, status in (({}, 400), ({"SSECustomerAlgorithm": "AES256", "SSECustomerKey": other}, 403)):
    try:
        s3.head_object(Bucket="tls", Key="boto-ssec", **kw)
        raise SystemExit("SSE-C object read without its key")
    except botocore.exceptions.ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == status, e.response
print("boto3 SSE-C ok")
PY
export RCLONE_CONFIG_Q_ENDPOINT="$AWS_ENDPOINT_URL" RCLONE_CONFIG_Q_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" RCLONE_CONFIG_Q_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY"
ca=$AWS_CA_BUNDLE
env -u AWS_CA_BUNDLE rclone -q --ca-cert "$ca" copy "$work/rtree/d3" q:tls/rtree
env -u AWS_CA_BUNDLE rclone -q --ca-cert "$ca" check "$work/rtree/d3" q:tls/rtree
if env -u AWS_CA_BUNDLE rclone -q --low-level-retries 1 --retries 1 ls q:tls >/dev/null 2>&1; then echo "rclone trusted the gateway without its CA"; exit 1; fi

say "all S3 clients passed"
