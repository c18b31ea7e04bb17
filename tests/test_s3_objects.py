"""The on-disk object store (kinesim.s3.objects), without HTTP."""
from __future__ import annotations

import hashlib
import io
import os
import threading

import pytest

from kinesim.s3.errors import S3Error
from kinesim.s3.objects import MIN_PART_SIZE, ObjectStore, check_key, multipart_etag, valid_bucket_name


@pytest.fixture
def store(tmp_path):
    s = ObjectStore(str(tmp_path / "s3"))
    s.create_bucket("bkt")
    return s


def code_of(excinfo) -> str:
    return excinfo.value.code


def files_under(path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


def test_bucket_names():
    for ok in ("abc", "my.bucket-1", "a" * 63, "1bucket"):
        assert valid_bucket_name(ok), ok
    for bad in ("ab", "a" * 64, "Abc", "a_b", "a..b", "-ab", "ab-", ".ab", "10.0.0.1", "xn--ab", "sthree-x",
                "amzn-s3-demo-x", "ab-s3alias", "ab--ol-s3", "ab.mrap", "ab--x-s3", "ab--table-s3", "../x", ".meta"):
        assert not valid_bucket_name(bad), bad


def test_buckets(store, tmp_path):
    assert store.bucket_exists("bkt") and not store.bucket_exists("other")
    assert store.bucket_path("bkt") == os.path.realpath(tmp_path / "s3" / "bkt")
    with pytest.raises(S3Error) as e:
        store.create_bucket("bkt")
    assert code_of(e) == "BucketAlreadyOwnedByYou" and e.value.status == 409
    store.create_bucket("west", "us-west-2")
    assert [(b.name, b.region) for b in store.list_buckets()] == [("bkt", "us-east-1"), ("west", "us-west-2")]
    store.put_object("west", "k", b"x")
    with pytest.raises(S3Error) as e:
        store.delete_bucket("west")
    assert code_of(e) == "BucketNotEmpty"
    store.delete_object("west", "k")
    store.delete_bucket("west")
    assert not store.bucket_exists("west") and not os.path.exists(tmp_path / "s3" / ".meta" / "west")
    for name in ("..", ".meta", ".uploads", "a/b", ""):
        assert not store.bucket_exists(name)
        with pytest.raises(S3Error) as e:
            store.head_object(name, "k")
        assert code_of(e) == "NoSuchBucket"


@pytest.mark.parametrize("key", ["../x", "a/../../x", "/abs", "a//b", "./x", "a/.", "a\x00b", "a\\..\\x", "",
                                 "x" * 256, "//"])
def test_refused_keys(store, key, tmp_path):
    with pytest.raises(S3Error) as e:
        store.put_object("bkt", key, b"evil")
    assert code_of(e) == "InvalidArgument"
    assert files_under(tmp_path / "s3" / "bkt") == []
    assert not [f for f in files_under(tmp_path) if f.endswith("x") and not f.startswith("s3/.")]


def test_key_too_long():
    with pytest.raises(S3Error) as e:
        check_key("a/" * 600)
    assert code_of(e) == "KeyTooLongError"
    assert check_key("a/b/c") == ["a", "b", "c"] and check_key("a/b/") == ["a", "b"]


def test_symlink_out_of_bucket_refused(store, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, tmp_path / "s3" / "bkt" / "link")
    with pytest.raises(S3Error) as e:
        store.put_object("bkt", "link/x", b"evil")
    assert code_of(e) == "InvalidArgument"
    assert list(outside.iterdir()) == []


def test_put_get_delete(store, tmp_path):
    etag = store.put_object("bkt", "a/b/c.txt", io.BytesIO(b"hello"), "text/plain", {"k": "v"})
    assert etag == f'"{hashlib.md5(b"hello").hexdigest()}"'
    path, meta = store.get_object("bkt", "a/b/c.txt")
    assert path == os.path.join(store.bucket_path("bkt"), "a", "b", "c.txt")
    assert open(path, "rb").read() == b"hello"
    assert (meta.size, meta.content_type, meta.metadata, meta.etag) == (5, "text/plain", {"k": "v"}, etag)
    f, meta2 = store.open_object("bkt", "a/b/c.txt")
    with f:
        assert f.read() == b"hello" and meta2 == meta
    # Nothing but the object itself in the bucket's directory tree.
    assert files_under(tmp_path / "s3" / "bkt") == ["a/b/c.txt"]
    store.delete_object("bkt", "a/b/c.txt")
    store.delete_object("bkt", "a/b/c.txt")  # idempotent
    assert files_under(tmp_path / "s3" / "bkt") == [] and os.listdir(tmp_path / "s3" / "bkt") == []
    with pytest.raises(S3Error) as e:
        store.head_object("bkt", "a/b/c.txt")
    assert code_of(e) == "NoSuchKey"


def test_open_object_pins_the_version_read(store):
    store.put_object("bkt", "k", b"old")
    f, meta = store.open_object("bkt", "k")
    store.put_object("bkt", "k", b"new bytes")
    with f:
        assert f.read() == b"old" and meta.size == 3
    assert store.head_object("bkt", "k").size == 9


def test_staging_is_atomic(store, tmp_path):
    staged = store.stage(b"staged")
    assert files_under(tmp_path / "s3" / "bkt") == []  # invisible until committed
    with pytest.raises(S3Error):
        store.head_object("bkt", "k")
    store.commit("bkt", "k", staged)
    assert store.head_object("bkt", "k").size == 6

    class Exploding:
        def __init__(self):
            self.n = 0

        def read(self, size):
            self.n += 1
            if self.n > 2:
                raise OSError("client went away")
            return b"x" * 1000

    with pytest.raises(OSError):
        store.stage(Exploding())
    assert os.listdir(tmp_path / "s3" / ".tmp") == []  # the partial body is gone


def test_conflicts(store):
    store.put_object("bkt", "x", b"1")
    with pytest.raises(S3Error) as e:
        store.put_object("bkt", "x/y", b"2")
    assert code_of(e) == "ParentIsObject" and e.value.status == 409
    store.put_object("bkt", "d/e", b"3")
    with pytest.raises(S3Error) as e:
        store.put_object("bkt", "d", b"4")
    assert code_of(e) == "ObjectExistsAsDirectory"
    with pytest.raises(S3Error) as e:
        store.put_object("bkt", "x/", b"")
    assert code_of(e) == "ParentIsObject"


def test_markers(store, tmp_path):
    store.put_object("bkt", "m/", b"")
    store.put_object("bkt", "m/n/", b"marker data")
    assert os.path.isdir(tmp_path / "s3" / "bkt" / "m" / "n")
    assert files_under(tmp_path / "s3" / "bkt") == []  # markers' bytes are kept outside the bucket tree
    assert store.head_object("bkt", "m/n/").size == 11
    store.put_object("bkt", "m/n/o", b"x")
    store.delete_object("bkt", "m/n/o")
    assert os.path.isdir(tmp_path / "s3" / "bkt" / "m" / "n")  # kept for the marker
    keys = [o.key for o in store.list_objects("bkt").objects]
    assert keys == ["m/", "m/n/"]
    page = store.list_objects("bkt", delimiter="/")
    assert page.common_prefixes == ["m/"] and page.objects == []
    store.delete_object("bkt", "m/n/")
    store.delete_object("bkt", "m/")
    assert os.listdir(tmp_path / "s3" / "bkt") == []


def test_listing(store):
    keys = ["a/1", "a/2", "a/b/3", "a-b", "b", "c/d/e"]
    for key in keys:
        store.put_object("bkt", key, key.encode())
    assert [o.key for o in store.list_objects("bkt").objects] == sorted(keys)  # "a-b" before "a/1": byte order
    page = store.list_objects("bkt", delimiter="/")
    assert [o.key for o in page.objects] == ["a-b", "b"] and page.common_prefixes == ["a/", "c/"]
    page = store.list_objects("bkt", prefix="a", delimiter="/")
    assert [o.key for o in page.objects] == ["a-b"] and page.common_prefixes == ["a/"]
    page = store.list_objects("bkt", prefix="a/", delimiter="/", max_keys=2)
    assert [o.key for o in page.objects] == ["a/1", "a/2"] and page.is_truncated and page.last == "a/2"
    page = store.list_objects("bkt", prefix="a/", delimiter="/", after="a/2")
    assert page.common_prefixes == ["a/b/"] and not page.is_truncated
    page = store.list_objects("bkt", delimiter="/", after="a/")  # a common prefix is not repeated
    assert page.common_prefixes == ["c/"]
    page = store.list_objects("bkt", delimiter="-")
    assert page.common_prefixes == ["a-"] and [o.key for o in page.objects] == ["a/1", "a/2", "a/b/3", "b", "c/d/e"]
    assert store.list_objects("bkt", prefix="zz").objects == []
    assert store.list_objects("bkt", prefix="../").objects == []


def test_external_file_adopted(store, tmp_path):
    path = tmp_path / "s3" / "bkt" / "ext" / "part-0.csv"
    path.parent.mkdir()
    path.write_bytes(b"1,2\n")
    meta = store.head_object("bkt", "ext/part-0.csv")
    assert meta.etag == '"' + hashlib.md5(b"1,2\n").hexdigest() + '"' and meta.size == 4
    assert meta.content_type == "binary/octet-stream"
    path.write_bytes(b"changed outside\n")  # a stale sidecar is noticed
    assert store.head_object("bkt", "ext/part-0.csv").size == 16


def test_conditional_commit(store):
    staged = store.stage(b"a")
    store.commit("bkt", "k", staged, if_none_match=True)
    with pytest.raises(S3Error) as e:
        store.commit("bkt", "k", store.stage(b"b"), if_none_match=True)
    assert code_of(e) == "PreconditionFailed"
    with pytest.raises(S3Error) as e:
        store.commit("bkt", "missing", store.stage(b"b"), if_match='"x"')
    assert code_of(e) == "NoSuchKey"


def test_multipart(store, tmp_path):
    up = store.create_multipart_upload("bkt", "big", "text/csv", {"m": "1"})
    part1, part2 = os.urandom(MIN_PART_SIZE), b"end"
    p1 = store.upload_part("bkt", "big", up.upload_id, 1, store.stage(part1))
    p2 = store.upload_part("bkt", "big", up.upload_id, 2, store.stage(part2))
    assert [p.number for p in store.list_parts("bkt", "big", up.upload_id)] == [1, 2]
    assert files_under(tmp_path / "s3" / "bkt") == []  # parts are staged out of the bucket
    meta = store.complete_multipart_upload("bkt", "big", up.upload_id, [(1, p1.etag), (2, p2.etag)])
    assert meta.etag == multipart_etag([p1.etag, p2.etag], 2) and meta.parts_count == 2
    assert meta.content_type == "text/csv" and meta.metadata == {"m": "1"}
    f, _ = store.open_object("bkt", "big")
    with f:
        assert f.read() == part1 + part2
    assert os.listdir(tmp_path / "s3" / ".uploads") == []
    with pytest.raises(S3Error) as e:
        store.get_upload("bkt", "big", up.upload_id)
    assert code_of(e) == "NoSuchUpload"
    with pytest.raises(S3Error) as e:
        store.get_upload("bkt", "big", "../../bkt")
    assert code_of(e) == "NoSuchUpload"


def test_multipart_wrong_key_or_bucket(store):
    store.create_bucket("other")
    up = store.create_multipart_upload("bkt", "k")
    for bucket, key in (("other", "k"), ("bkt", "k2")):
        with pytest.raises(S3Error) as e:
            store.upload_part(bucket, key, up.upload_id, 1, store.stage(b"x"))
        assert code_of(e) == "NoSuchUpload"
    with pytest.raises(S3Error) as e:
        store.upload_part("bkt", "k", up.upload_id, 0, store.stage(b"x"))
    assert code_of(e) == "InvalidArgument"


def test_concurrent_puts_and_deletes_keep_tree_consistent(store, tmp_path):
    errors = []

    def worker(n):
        try:
            for i in range(50):
                key = f"dir/{n}/{i % 3}"
                store.put_object("bkt", key, f"{n}-{i}".encode())
                store.delete_object("bkt", key)
        except Exception as err:  # pragma: no cover - what the test looks for
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.list_objects("bkt").objects == [] and os.listdir(tmp_path / "s3" / "bkt") == []


def test_survives_new_instance(store, tmp_path):
    store.put_object("bkt", "k", b"kept", "text/plain", {"a": "b"})
    again = ObjectStore(str(tmp_path / "s3"))
    meta = again.head_object("bkt", "k")
    assert (meta.size, meta.content_type, meta.metadata) == (4, "text/plain", {"a": "b"})
