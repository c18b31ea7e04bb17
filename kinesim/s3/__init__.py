"""S3: an object store on disk (`objects.ObjectStore`: buckets are directories, objects plain files
that Spark and pandas read through file://) and the S3 REST API over it (`api.S3App`, served on the
edge port, path-style and `<bucket>.localhost` virtual-host style).

Modules: `objects` (the store), with `uploads` (multipart uploads in progress), `bucket_files` (a
bucket directory's files, never through a symbolic link) and `rules` (bucket names, keys, ETags);
`api` (routing, WSGI), `bucket_ops` / `object_ops` / `multipart_ops` (the operations), `payload`
(request bodies: aws-chunked, checksums), `exchange` (request/response), `xmldoc` (XML and dates),
`errors`. Bucket configurations: `bucket_config` (the stored documents), `bucket_config_xml` and
`bucket_config_ops` (their API), `lifecycle_sweep` (expiration applied). Event notifications:
`notification_config` (the configuration and its checks), `notification_ops` (its API),
`notification_events` (AWS's event records), `notification_outbox` (durable, delivered by a
dispatcher thread), `notifications` (what the object store calls on every write).
"""
