"""Firehose: delivery streams that buffer records durably and deliver them as S3 objects.

`service.FirehoseService` answers the Firehose API (JSON 1.1, target prefix `Firehose_20150804`)
on the edge; `streams_api` and `records_api` hold its operations, `buffers` the DirectPut
buffers committed before every acknowledgement, `source` the Kinesis stream reader of
KinesisStreamAsSource, and `delivery` the per-stream flush loop that writes objects. The record
transformations it applies are pure functions in `keys`, `compression`, `conversion`,
`partitioning` and `transform`; MetadataExtraction's jq queries run in worker processes
(`jq_runner` in the server, `jq_worker` in each worker).
"""
