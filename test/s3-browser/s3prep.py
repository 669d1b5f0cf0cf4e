"""boto3 side of the browser test: `prep ALLOWED_ORIGIN` makes the bucket,
sets its CORS rules and prints (JSON) a presigned POST (SigV4) and a
presigned GET URL; `check KEY TEXT` reads the object back through S3."""
import json, os, sys

import boto3, botocore.config

s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  config=botocore.config.Config(signature_version="s3v4"))
bucket = "browser"

if sys.argv[1] == "prep":
    origin = sys.argv[2]
    try:
        s3.create_bucket(Bucket=bucket)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass  # a second run on the same grid
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": [{
        "AllowedOrigins": [origin], "AllowedMethods": ["GET", "POST"],
        "AllowedHeaders": ["x-custom-header"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 60}]})
    s3.put_object(Bucket=bucket, Key="hello.txt", Body=b"hello, browser")
    fields = {"success_action_status": "201"}
    conditions = [{"success_action_status": "201"}, ["content-length-range", 1, 1 << 20]]
    post = s3.generate_presigned_post(bucket, "uploads/${filename}", Fields=fields,
                                      Conditions=conditions, ExpiresIn=300)
    redirect = origin + "/done"
    form = s3.generate_presigned_post(bucket, "forms/${filename}", Fields={"success_action_redirect": redirect},
                                      Conditions=[{"success_action_redirect": redirect}], ExpiresIn=300)
    get = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "hello.txt"}, ExpiresIn=300)
    print(json.dumps({"post": post, "form": form, "get": get}))
elif sys.argv[1] == "check":
    body = s3.get_object(Bucket=bucket, Key=sys.argv[2])["Body"].read().decode()
    if body != sys.argv[3]:
        sys.exit(f"{sys.argv[2]}: {body!r}, want {sys.argv[3]!r}")
    print(f"{sys.argv[2]} is in the bucket")
