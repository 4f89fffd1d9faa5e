"""A private bucket on moto's S3 server, for tests/plane_private.rs.

    moto.py setup URL        an IAM user with a key allowed S3 and IAM (the
                             server's first three actions, taken without
                             authentication), a bucket `fleet`; prints the
                             key as JSON
    moto.py put URL KEYFILE BUCKET KEY FILE   puts FILE (botocore signs)
    moto.py get URL KEYFILE BUCKET KEY        prints the object
    moto.py type URL KEYFILE BUCKET KEY       prints its Content-Type
    moto.py rotate URL KEYFILE                a second key for the user,
                             the first deleted; prints the new key
    moto.py reader URL KEYFILE                a second user, allowed to list
                             the bucket and get its objects alone; prints
                             its key
    moto.py versioning URL KEYFILE BUCKET     keeps every version of an object
                             (each PUT one more)
    moto.py versions URL KEYFILE BUCKET PREFIX   prints {key: versions} of
                             the keys under PREFIX, as JSON
    moto.py history URL KEYFILE BUCKET KEY    prints each version of the
                             object, oldest first, as JSON: [{"body": text,
                             "modified": seconds since the epoch}]
    moto.py presign URL KEYFILE BUCKET KEY   prints a presigned URL that
                             PUTs the object (an hour)
"""
import json
import sys

import boto3


def client(kind, url, key=None):
    creds = key or {"AccessKeyId": "none", "SecretAccessKey": "none"}
    return boto3.client(
        kind,
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
    )


def main():
    cmd, url = sys.argv[1], sys.argv[2]
    if cmd == "setup":
        iam = client("iam", url)
        iam.create_user(UserName="device")
        key = iam.create_access_key(UserName="device")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["s3:*", "iam:*"], "Resource": "*"}],
        }
        iam.put_user_policy(UserName="device", PolicyName="fleet", PolicyDocument=json.dumps(policy))
        client("s3", url, key).create_bucket(Bucket="fleet")
        print(json.dumps({"AccessKeyId": key["AccessKeyId"], "SecretAccessKey": key["SecretAccessKey"]}))
        return
    key = json.load(open(sys.argv[3]))
    if cmd == "put":
        bucket, name, path = sys.argv[4:7]
        client("s3", url, key).put_object(Bucket=bucket, Key=name, Body=open(path, "rb").read())
    elif cmd == "get":
        bucket, name = sys.argv[4:6]
        sys.stdout.buffer.write(client("s3", url, key).get_object(Bucket=bucket, Key=name)["Body"].read())
    elif cmd == "history":
        bucket, name = sys.argv[4:6]
        s3 = client("s3", url, key)
        found = []
        pages = s3.get_paginator("list_object_versions")
        for page in pages.paginate(Bucket=bucket, Prefix=name):
            for v in page.get("Versions", []):
                if v["Key"] == name:
                    found.append(v)
        # S3 lists a key's versions newest first.
        found.reverse()
        out = []
        for v in found:
            body = s3.get_object(Bucket=bucket, Key=name, VersionId=v["VersionId"])["Body"].read()
            out.append({"body": body.decode(), "modified": v["LastModified"].timestamp()})
        print(json.dumps(out))
    elif cmd == "presign":
        from botocore.config import Config

        bucket, name = sys.argv[4:6]
        s3 = boto3.client(
            "s3",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
            config=Config(signature_version="s3v4"),
        )
        print(
            s3.generate_presigned_url(
                "put_object", Params={"Bucket": bucket, "Key": name}, ExpiresIn=3600
            )
        )
    elif cmd == "type":
        bucket, name = sys.argv[4:6]
        print(client("s3", url, key).head_object(Bucket=bucket, Key=name)["ContentType"])
    elif cmd == "reader":
        iam = client("iam", url, key)
        iam.create_user(UserName="reader")
        new = iam.create_access_key(UserName="reader")["AccessKey"]
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": ["s3:ListBucket", "s3:GetObject"], "Resource": "*"}],
        }
        iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(policy))
        print(json.dumps({"AccessKeyId": new["AccessKeyId"], "SecretAccessKey": new["SecretAccessKey"]}))
    elif cmd == "versioning":
        client("s3", url, key).put_bucket_versioning(
            Bucket=sys.argv[4], VersioningConfiguration={"Status": "Enabled"}
        )
    elif cmd == "versions":
        bucket, prefix = sys.argv[4:6]
        counts = {}
        pages = client("s3", url, key).get_paginator("list_object_versions")
        for page in pages.paginate(Bucket=bucket, Prefix=prefix):
            for v in page.get("Versions", []):
                counts[v["Key"]] = counts.get(v["Key"], 0) + 1
        print(json.dumps(counts))
    elif cmd == "rotate":
        iam = client("iam", url, key)
        new = iam.create_access_key(UserName="device")["AccessKey"]
        iam.delete_access_key(UserName="device", AccessKeyId=key["AccessKeyId"])
        print(json.dumps({"AccessKeyId": new["AccessKeyId"], "SecretAccessKey": new["SecretAccessKey"]}))


main()
