"""The stage methods and source functions of the Python package, written by
scripts/gen_spec.py from the operators' declarations (`dataecho spec`; do not edit):
each one's keywords, types, defaults and docstring come from its op's declaration
(include/dataecho/spec/schema.h, docs/spec.md). ``PipelineDef`` (_definition.py)
inherits the methods; the ops with a Python form of their own are written there.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Optional, Sequence, Union

if TYPE_CHECKING:
    from ._definition import PipelineDef


class DeclaredStages:
    """The stage methods that follow from the declarations alone."""

    __slots__ = ()

    def _declared(self, op: str, options: Mapping[str, Any]) -> PipelineDef:
        raise NotImplementedError  # PipelineDef's

    def _of_source(self, kind: str, taken: str, options: Mapping[str, Any]) -> PipelineDef:
        raise NotImplementedError  # PipelineDef's

    def batch(self, size: int, *, drop_remainder: bool = False) -> PipelineDef:
        """Stacks ``size`` elements into one: every tensor gets a leading batch dimension.

        Options (docs/spec.md, "batch"):

        ``size``: elements per batch; an integer in [1, 16777216]; required.
        ``drop_remainder``: drop a last, smaller batch; true or false; default false.
        """
        return self._declared("batch", locals())

    def bucket(self, boundaries: Sequence[int], batch_sizes: Sequence[int] = (), *,
               token_budget: Optional[int] = None, field: Optional[str] = None, drop_remainder: bool = False,
               fields: Any = None, lengths: bool = True) -> PipelineDef:
        """Batches sequences of similar length together (tf.data's bucket_by_sequence_length),
        padded as padded_batch pads.

        Options (docs/spec.md, "bucket"):

        ``boundaries``: increasing lengths that split the buckets; a list of integers in [1,
        16777216]; default none: one bucket.
        ``batch_sizes``: one per bucket (boundaries + 1); or token_budget; a list of
        integers in [1, 16777216]; default none.
        ``token_budget``: instead of batch_sizes: a batch's padded tokens; an integer in [1,
        1073741824]; default none.
        ``field``: the field whose length picks the bucket; a string; default "tokens".
        ``drop_remainder``: drop each bucket's last, smaller batch; true or false; default
        false.
        ``fields``: the fields to pad and how; a list of field names, or an object {field:
        {"length" | "multiple": n, "value": v, "truncate": bool}}; default every field of
        rank >= 1, to the batch's longest, with 0.
        ``lengths``: add `<field>_length` per padded field; true or false; default true.
        """
        return self._declared("bucket", locals())

    def cache(self, path: Union[str, "os.PathLike[str]"] = "", *, key: Optional[str] = None,
              max_bytes: Optional[int] = None, on_full: str = "fail",
              allow_shuffled: bool = False) -> PipelineDef:
        """Caches the first pass, in memory or on local disk; later passes read the cache
        (docs/echo.md, "Cache or echo"). On disk, a file written during the first pass is
        renamed into place only when the pass completed, keyed by a fingerprint of
        everything upstream (the spec up to here, the seed, the local source files' sizes
        and times), so that a changed spec or file never reads a stale cache; ``key`` names
        it instead (required after a Python function). A cache after a shuffle would replay
        one order every epoch: it is refused unless ``allow_shuffled``; shuffle after the
        cache.

        Options (docs/spec.md, "cache"):

        ``path``: a folder on local disk (relative to the spec's); a string; default in
        memory.
        ``key``: disk: names what the cache holds; a string; default a fingerprint of
        everything upstream and of the source's files.
        ``max_bytes``: memory: bytes of tensors held (0: a quarter of physical memory); an
        integer in [0, 1125899906842624]; default 0.
        ``on_full``: memory: past max_bytes, fail the pass or keep the prefix that fits; one
        of "fail" or "prefix"; default "fail".
        ``allow_shuffled``: allow a shuffle upstream (its first order is replayed); true or
        false; default false.
        """
        return self._declared("cache", locals())

    def echo(self, factor: Union[float, str] = 2, *, max_factor: Optional[float] = None,
             buffer: Optional[int] = None, buffer_bytes: Optional[int] = None,
             seed: Optional[int] = None) -> PipelineDef:
        """Data echoing: repeats every element ``factor`` times in all, or adaptively while the
        next fresh element is late (docs/echo.md). Place it right after the slowest stage
        (the paper's rule; ``dataecho profile`` measures it): before the augmentation
        (example echoing) each copy is augmented differently, and a shuffle after it keeps
        copies out of one batch; after the batch (batch echoing) whole batches repeat.
        Choose ``factor`` about R = upstream time / training-step time: more repeats than R
        buy no time. With "auto" it repeats nothing until the tuner has raised every "auto"
        parallelism and buffer as far as helps and the training loop still waits. A small
        ``buffer`` makes an adaptive echo repeat while the reader stalls between a network's
        bursts, so that it settles above R.

        Options (docs/spec.md, "echo"):

        ``factor``: copies in all (2.5: two, a third with p = 0.5); "adaptive": repeats only
        while the input is late; "auto": adaptive, its cap set by the tuner; a number in [1,
        1000000], "adaptive" or "auto"; required.
        ``max_factor``: adaptive and auto: at most this many copies; a number in [1,
        1000000]; default 4.0.
        ``buffer``: adaptive and auto: elements in the fresh queue and the repeat pool; an
        integer in [1, 1048576]; default 1024.
        ``buffer_bytes``: adaptive and auto: bytes of each (0: no byte bound); an integer in
        [0, 1099511627776]; default 16777216.
        ``seed``: the seed of the fractional and adaptive draws (the same in every epoch
        when given); an integer >= 0; default derived from the pipeline's seed.
        """
        return self._declared("echo", locals())

    def interleave(self, cycle: int = 4, *, parallelism: Optional[Union[int, str]] = None,
                   buffer_per_shard: Optional[int] = None) -> PipelineDef:
        """Reads ``cycle`` shards (files) at once, one element from each in turn; right after a
        source over several files. With ``parallelism`` "auto", one thread per open file,
        ``buffer_per_shard`` chosen by the tuner (the cycle sets the order: never tuned).

        Options (docs/spec.md, "interleave"):

        ``cycle``: shards open at once; an integer in [1, 1024]; default 4.
        ``parallelism``: reader threads (-1: one per open shard; 0: none, read on the
        consumer's thread; "auto": one per shard, with buffer_per_shard tuned); an integer
        in [-1, 1024] or "auto"; default -1.
        ``buffer_per_shard``: elements read ahead per open shard; an integer in [1,
        1048576]; default 2.
        """
        return self._declared("interleave", locals())

    def padded_batch(self, size: int, *, drop_remainder: bool = False, fields: Any = None,
                     lengths: bool = True) -> PipelineDef:
        """Batches elements of different lengths, padding each variable-length field
        (docs/text.md).

        Options (docs/spec.md, "padded_batch"):

        ``size``: elements per batch; an integer in [1, 16777216]; required.
        ``drop_remainder``: drop a last, smaller batch; true or false; default false.
        ``fields``: the fields to pad and how; a list of field names, or an object {field:
        {"length" | "multiple": n, "value": v, "truncate": bool}}; default every field of
        rank >= 1, to the batch's longest, with 0.
        ``lengths``: add `<field>_length` per padded field; true or false; default true.
        """
        return self._declared("padded_batch", locals())

    def prefetch(self, buffer: Union[int, str] = 2) -> PipelineDef:
        """Runs everything before it on a thread of its own, ``buffer`` elements ahead.

        Options (docs/spec.md, "prefetch"):

        ``buffer``: elements ahead ("auto": sized by the tuner within the RAM budget); an
        integer in [1, 1048576] or "auto"; default 2.
        """
        return self._declared("prefetch", locals())

    def repeat(self, count: int = -1) -> PipelineDef:
        """Passes over the input ``count`` times; epochs are stamped on rows.

        Options (docs/spec.md, "repeat"):

        ``count``: passes (-1: forever); an integer >= -1; default -1.
        """
        return self._declared("repeat", locals())

    def shard(self, num_shards: int, index: int) -> PipelineDef:
        """One worker's share: whole files right after a source over at least ``num_shards``
        files, else every ``num_shards``-th element from ``index``.

        Options (docs/spec.md, "shard"):

        ``num_shards``: shares; an integer >= 1; required.
        ``index``: this share, < num_shards; an integer >= 0; required.
        """
        return self._declared("shard", locals())

    def shuffle(self, buffer: int, *, seed: Optional[int] = None,
                reshuffle_each_iteration: Optional[bool] = None) -> PipelineDef:
        """Shuffles through a buffer; after an example echo it keeps an element's copies out of
        one batch.

        Options (docs/spec.md, "shuffle"):

        ``buffer``: elements held; an integer in [1, 1073741824]; required.
        ``seed``: the seed of the shuffle (the same in every epoch when given); an integer
        >= 0; default derived from the pipeline's seed.
        ``reshuffle_each_iteration``: a new order each pass over the input; true or false;
        default true.
        """
        return self._declared("shuffle", locals())

    def skip(self, count: int) -> PipelineDef:
        """All but the first ``count`` elements.

        Options (docs/spec.md, "skip"):

        ``count``: elements dropped; an integer >= 0; required.
        """
        return self._declared("skip", locals())

    def take(self, count: int) -> PipelineDef:
        """The first ``count`` elements.

        Options (docs/spec.md, "take"):

        ``count``: elements kept; an integer >= 0; required.
        """
        return self._declared("take", locals())

    def unbatch(self) -> PipelineDef:
        """Splits each batch into its rows, cutting padding off by ``<field>_length``.

        Options (docs/spec.md, "unbatch"):

        No options.
        """
        return self._declared("unbatch", locals())

    def distribute(self, dispatcher: str, job: str, *, sharding: Optional[str] = None,
                   lanes: Optional[int] = None, consumers: Optional[int] = None,
                   consumer: Optional[int] = None, epoch: Optional[int] = None,
                   buffer_mb: Optional[int] = None,
                   token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                   connect_timeout_s: Optional[float] = None,
                   ca_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                   ca_path: Optional[Union[str, "os.PathLike[str]"]] = None,
                   tls_server_name: Optional[str] = None,
                   scale: Optional[Mapping[str, Any]] = None) -> PipelineDef:
        """This pipeline run on the data service's workers: a new definition whose source is a
        ``service`` source with this pipeline (its source and stages so far, its seed and
        settings) as the upstream ``pipeline``; the stages added after it (shuffle, echo,
        batch, prefetch) run in this process, on the trainer's side. Each pass of the built
        pipeline (iterated again, set_epoch, a DataLoader's pass) reads the job's next
        epoch, as a repeat after it does (docs/python.md, "The data service"). Refused
        (SpecError, a ValueError) for a pipeline without a source, one that is distributed
        already, and one with a Python callable (the workers build the upstream from its
        JSON spec).

        Options (docs/spec.md, "service"):

        ``dispatcher``: the dispatcher's HOST:PORT; a string; required.
        ``job``: the job's name: trainers that name the same job and upstream share it; a
        string; required.
        ``sharding``: "off": each worker makes its own passes of the whole upstream;
        "dynamic": the source's pieces leased to the workers, each record's element once per
        epoch (an element-wise upstream: map, filter), in the order they come; "static": the
        same pieces, one in flight per lane, each consumer's elements in the same order on
        every run and resume, whichever workers compute them; one of "off", "dynamic" or
        "static"; default "off".
        ``lanes``: dynamic and static: the lanes the pieces are dealt to (consumers must
        divide them); an integer in [1, 65536]; default 12.
        ``consumers``: dynamic and static: the job's consumers (trainer ranks); consumer r
        owns lanes k mod consumers == r; an integer in [1, 65536]; default 1.
        ``consumer``: dynamic and static: this consumer's number; an integer in [0, 65536];
        default 0.
        ``epoch``: the job's epoch that the first pass reads (a repeat after the source
        reads the next ones); the trainer's side sets it for each epoch (Python's for_epoch:
        a pipeline's pass k reads epoch + k); an integer in [0, 1073741824]; default 0.
        ``buffer_mb``: MiB of elements read ahead from all workers together; an integer in
        [1, 1048576]; default 64.
        ``token_file``: a file whose first line is the service's token ("":
        $DATAECHO_SERVICE_TOKEN, or none); a string; default "".
        ``connect_timeout_s``: how long to wait for the dispatcher, a first worker, or a cut
        stream to reopen; a number >= 0.001; default 30.
        ``ca_file``: PEM certificates of the CA(s) that signed the dispatcher's and workers'
        TLS certificates: calls use TLS ("": plaintext); a string; default "".
        ``ca_path``: a folder of such PEM files (*.pem, *.crt), joined (with or instead of
        ca_file); a string; default "".
        ``tls_server_name``: the name the servers' TLS certificates must carry ("": the host
        dialled); a string; default "".
        ``scale``: what changes the number of workers, and with policy echo_or_scale the
        "auto" echo's cap (docs/service.md, "Echo or scale"); an object; default none.
        """
        return self._of_source("service", "pipeline", locals())


def _source(kind: str, options: Mapping[str, Any]) -> PipelineDef:
    from ._definition import declared_source  # which imports this module

    return declared_source(kind, options)


def files(root: Optional[Union[str, "os.PathLike[str]"]] = None, *,
          uri: Optional[Union[str, Sequence[str]]] = None,
          list: Optional[Union[str, "os.PathLike[str]"]] = None,
          base: Optional[Union[str, "os.PathLike[str]"]] = None, delimiter: Optional[str] = None,
          header: Optional[bool] = None, extensions: Optional[Union[str, Sequence[str]]] = None,
          allow_empty: Optional[bool] = None, reads_in_flight: Optional[int] = None,
          path: Optional[bool] = None, on_error: Optional[str] = None, buffer_bytes: Optional[int] = None,
          cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None, cache_max_bytes: Optional[int] = None,
          cache_revalidate_s: Optional[float] = None, http: Optional[Mapping[str, Any]] = None,
          s3: Optional[Mapping[str, Any]] = None) -> PipelineDef:
    """Files read as they are, one element each ("image": the bytes, "label"): an ImageFolder
    tree, a pattern, or a CSV or TSV list (docs/formats.md).

    Options (docs/spec.md, "files"):

    ``root``: an ImageFolder tree: a folder per class (one of root, uri, list); a string;
    default none.
    ``uri``: paths, globs, brace patterns or URLs (one of root, uri, list); a string or a
    list of strings; default none.
    ``list``: a CSV or TSV file: path, label, further columns (one of root, uri, list); a
    string; default none.
    ``base``: list: what relative paths are relative to; a string; default the list's
    folder.
    ``delimiter``: list: the column separator, one character; a string; default tab for .tsv
    and .tab, else ",".
    ``header``: list: the first row names the columns; true or false; default when the first
    row's second cell is not an integer.
    ``extensions``: root: the files to read ([]: every file); a string or a list of strings;
    default torchvision's image extensions.
    ``allow_empty``: root: allow a class folder without files; true or false; default false.
    ``reads_in_flight``: files read at once; an integer in [1, 1024]; default 8.
    ``path``: add each file's path as field "path"; true or false; default false.
    ``on_error``: a bad record: stop with an error naming it, skip it, or repeat the last
    good one (docs/formats.md); one of "fail", "skip" or "echo"; default "fail".
    ``buffer_bytes``: a stream's read-ahead buffer; an integer in [1, 1073741824]; default
    1048576.
    ``cache_dir``: http(s) and s3:// files kept in this folder on local disk (relative to
    the spec's); a string; default none.
    ``cache_max_bytes``: the cache folder's bound, least recently used first out (0: none);
    an integer in [0, 1125899906842624]; default 0.
    ``cache_revalidate_s``: seconds a cached file is used before the server is asked again;
    a number in [0, 1000000000]; default 60.0.
    ``http``: http(s) transfers (docs/http.md); harmless for local files; an object; default
    none.
    ``s3``: s3:// objects: store, region, profile (docs/http.md); secrets only from the
    environment or ~/.aws; an object; default none.
    """
    return _source("files", locals())


def idx(images: Union[str, "os.PathLike[str]"], labels: Optional[Union[str, "os.PathLike[str]"]] = None, *,
        limit: Optional[int] = None, on_error: Optional[str] = None, buffer_bytes: Optional[int] = None,
        cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None, cache_max_bytes: Optional[int] = None,
        cache_revalidate_s: Optional[float] = None, http: Optional[Mapping[str, Any]] = None,
        s3: Optional[Mapping[str, Any]] = None) -> PipelineDef:
    """MNIST's IDX files (optionally gzipped): fields "image" (uint8 [h, w]) and "label"
    (int64).

    Options (docs/spec.md, "idx"):

    ``images``: the images file (path or URL); a string; required.
    ``labels``: the labels file; a string; default none.
    ``limit``: only the first examples (-1: all); an integer >= -1; default -1.
    ``on_error``: a bad record: stop with an error naming it, skip it, or repeat the last
    good one (docs/formats.md); one of "fail", "skip" or "echo"; default "fail".
    ``buffer_bytes``: a stream's read-ahead buffer; an integer in [1, 1073741824]; default
    1048576.
    ``cache_dir``: http(s) and s3:// files kept in this folder on local disk (relative to
    the spec's); a string; default none.
    ``cache_max_bytes``: the cache folder's bound, least recently used first out (0: none);
    an integer in [0, 1125899906842624]; default 0.
    ``cache_revalidate_s``: seconds a cached file is used before the server is asked again;
    a number in [0, 1000000000]; default 60.0.
    ``http``: http(s) transfers (docs/http.md); harmless for local files; an object; default
    none.
    ``s3``: s3:// objects: store, region, profile (docs/http.md); secrets only from the
    environment or ~/.aws; an object; default none.
    """
    return _source("idx", locals())


def range(count: int, *, shards: Optional[int] = None) -> PipelineDef:  # noqa: A001 (the spec's name)
    """The integers 0..count-1 as field "value" (int64).

    Options (docs/spec.md, "range"):

    ``count``: how many; an integer >= 0; required.
    ``shards``: parts, like files, for interleave and shard; an integer in [1, 1048576];
    default 1.
    """
    return _source("range", locals())


def service(dispatcher: str, job: str, pipeline: Any, *, sharding: Optional[str] = None,
            lanes: Optional[int] = None, consumers: Optional[int] = None, consumer: Optional[int] = None,
            epoch: Optional[int] = None, buffer_mb: Optional[int] = None,
            token_file: Optional[Union[str, "os.PathLike[str]"]] = None,
            connect_timeout_s: Optional[float] = None,
            ca_file: Optional[Union[str, "os.PathLike[str]"]] = None,
            ca_path: Optional[Union[str, "os.PathLike[str]"]] = None, tls_server_name: Optional[str] = None,
            scale: Optional[Mapping[str, Any]] = None) -> PipelineDef:
    """The elements of a pipeline that runs on the data service's workers (docs/service.md);
    the token comes from token_file or DATAECHO_SERVICE_TOKEN, never from the spec.

    Options (docs/spec.md, "service"):

    ``dispatcher``: the dispatcher's HOST:PORT; a string; required.
    ``job``: the job's name: trainers that name the same job and upstream share it; a
    string; required.
    ``pipeline``: the upstream the workers run (seeded from the job's name when it has no
    seed); a pipeline {"source": ..., "stages": [...]} or a source {"kind": ...}; required.
    ``sharding``: "off": each worker makes its own passes of the whole upstream; "dynamic":
    the source's pieces leased to the workers, each record's element once per epoch (an
    element-wise upstream: map, filter), in the order they come; "static": the same pieces,
    one in flight per lane, each consumer's elements in the same order on every run and
    resume, whichever workers compute them; one of "off", "dynamic" or "static"; default
    "off".
    ``lanes``: dynamic and static: the lanes the pieces are dealt to (consumers must divide
    them); an integer in [1, 65536]; default 12.
    ``consumers``: dynamic and static: the job's consumers (trainer ranks); consumer r owns
    lanes k mod consumers == r; an integer in [1, 65536]; default 1.
    ``consumer``: dynamic and static: this consumer's number; an integer in [0, 65536];
    default 0.
    ``epoch``: the job's epoch that the first pass reads (a repeat after the source reads
    the next ones); the trainer's side sets it for each epoch (Python's for_epoch: a
    pipeline's pass k reads epoch + k); an integer in [0, 1073741824]; default 0.
    ``buffer_mb``: MiB of elements read ahead from all workers together; an integer in [1,
    1048576]; default 64.
    ``token_file``: a file whose first line is the service's token ("":
    $DATAECHO_SERVICE_TOKEN, or none); a string; default "".
    ``connect_timeout_s``: how long to wait for the dispatcher, a first worker, or a cut
    stream to reopen; a number >= 0.001; default 30.
    ``ca_file``: PEM certificates of the CA(s) that signed the dispatcher's and workers' TLS
    certificates: calls use TLS ("": plaintext); a string; default "".
    ``ca_path``: a folder of such PEM files (*.pem, *.crt), joined (with or instead of
    ca_file); a string; default "".
    ``tls_server_name``: the name the servers' TLS certificates must carry ("": the host
    dialled); a string; default "".
    ``scale``: what changes the number of workers, and with policy echo_or_scale the "auto"
    echo's cap (docs/service.md, "Echo or scale"); an object; default none.
    """
    return _source("service", locals())


def tar(uri: Union[str, Sequence[str]], *, fields: Any = None, on_error: Optional[str] = None,
        buffer_bytes: Optional[int] = None, cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
        cache_max_bytes: Optional[int] = None, cache_revalidate_s: Optional[float] = None,
        http: Optional[Mapping[str, Any]] = None, s3: Optional[Mapping[str, Any]] = None) -> PipelineDef:
    """Tar shards in the WebDataset layout: files sharing a key make one sample
    (docs/formats.md).

    Options (docs/spec.md, "tar"):

    ``uri``: paths, globs, brace ranges ({00000..00007}), http(s) or s3:// URLs or @manifest
    files; a string or a list of strings; required.
    ``fields``: the files of a sample to keep, each required; a list of extensions, or an
    object {field: extension}; default every extension, each named by it.
    ``on_error``: a bad record: stop with an error naming it, skip it, or repeat the last
    good one (docs/formats.md); one of "fail", "skip" or "echo"; default "fail".
    ``buffer_bytes``: a stream's read-ahead buffer; an integer in [1, 1073741824]; default
    1048576.
    ``cache_dir``: http(s) and s3:// files kept in this folder on local disk (relative to
    the spec's); a string; default none.
    ``cache_max_bytes``: the cache folder's bound, least recently used first out (0: none);
    an integer in [0, 1125899906842624]; default 0.
    ``cache_revalidate_s``: seconds a cached file is used before the server is asked again;
    a number in [0, 1000000000]; default 60.0.
    ``http``: http(s) transfers (docs/http.md); harmless for local files; an object; default
    none.
    ``s3``: s3:// objects: store, region, profile (docs/http.md); secrets only from the
    environment or ~/.aws; an object; default none.
    """
    return _source("tar", locals())


def text(uri: Union[str, Sequence[str]], *, format: Optional[str] = None, separator: Optional[str] = None,
         max_bytes: Optional[int] = None, utf8: Optional[bool] = None, keep_empty: Optional[bool] = None,
         fields: Any = None, on_error: Optional[str] = None, buffer_bytes: Optional[int] = None,
         cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None, cache_max_bytes: Optional[int] = None,
         cache_revalidate_s: Optional[float] = None, http: Optional[Mapping[str, Any]] = None,
         s3: Optional[Mapping[str, Any]] = None) -> PipelineDef:
    """Text files (plain, gzip or dictzip) or JSON Lines: a line, or a document split by
    ``separator``, as field "text" (uint8 bytes); JSON Lines give a field per key
    (docs/text.md).

    Options (docs/spec.md, "text"):

    ``uri``: paths, globs, brace ranges ({00000..00007}), http(s) or s3:// URLs or @manifest
    files; a string or a list of strings; required.
    ``format``: text records, or a JSON object per line; one of "lines" or "jsonl"; default
    "lines".
    ``separator``: what ends a record (not empty); a string; default "\n".
    ``max_bytes``: a longer record is a bad record; an integer in [1, 1073741824]; default
    1048576.
    ``utf8``: invalid UTF-8 is a bad record; true or false; default true.
    ``keep_empty``: keep empty records; true or false; default false.
    ``fields``: jsonl: the keys to read, each required; a list of keys, or an object {field:
    key}; default every key.
    ``on_error``: a bad record: stop with an error naming it, skip it, or repeat the last
    good one (docs/formats.md); one of "fail", "skip" or "echo"; default "fail".
    ``buffer_bytes``: a stream's read-ahead buffer; an integer in [1, 1073741824]; default
    1048576.
    ``cache_dir``: http(s) and s3:// files kept in this folder on local disk (relative to
    the spec's); a string; default none.
    ``cache_max_bytes``: the cache folder's bound, least recently used first out (0: none);
    an integer in [0, 1125899906842624]; default 0.
    ``cache_revalidate_s``: seconds a cached file is used before the server is asked again;
    a number in [0, 1000000000]; default 60.0.
    ``http``: http(s) transfers (docs/http.md); harmless for local files; an object; default
    none.
    ``s3``: s3:// objects: store, region, profile (docs/http.md); secrets only from the
    environment or ~/.aws; an object; default none.
    """
    return _source("text", locals())


def tfrecord(uri: Union[str, Sequence[str]], *, features: Any = None, raw: Optional[bool] = None,
             verify_crc: Optional[bool] = None, on_error: Optional[str] = None,
             buffer_bytes: Optional[int] = None, cache_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
             cache_max_bytes: Optional[int] = None, cache_revalidate_s: Optional[float] = None,
             http: Optional[Mapping[str, Any]] = None, s3: Optional[Mapping[str, Any]] = None) -> PipelineDef:
    """TFRecord files of tf.train.Example records (docs/formats.md).

    Options (docs/spec.md, "tfrecord"):

    ``uri``: paths, globs, brace ranges ({00000..00007}), http(s) or s3:// URLs or @manifest
    files; a string or a list of strings; required.
    ``features``: the features to read, by field name; an object {field: tf.Example key or
    {"key": key}}; default every feature (image/encoded as "image", image/class/label as
    "label").
    ``raw``: each record's bytes as field "record", not parsed; true or false; default
    false.
    ``verify_crc``: check each record's CRCs; true or false; default true.
    ``on_error``: a bad record: stop with an error naming it, skip it, or repeat the last
    good one (docs/formats.md); one of "fail", "skip" or "echo"; default "fail".
    ``buffer_bytes``: a stream's read-ahead buffer; an integer in [1, 1073741824]; default
    1048576.
    ``cache_dir``: http(s) and s3:// files kept in this folder on local disk (relative to
    the spec's); a string; default none.
    ``cache_max_bytes``: the cache folder's bound, least recently used first out (0: none);
    an integer in [0, 1125899906842624]; default 0.
    ``cache_revalidate_s``: seconds a cached file is used before the server is asked again;
    a number in [0, 1000000000]; default 60.0.
    ``http``: http(s) transfers (docs/http.md); harmless for local files; an object; default
    none.
    ``s3``: s3:// objects: store, region, profile (docs/http.md); secrets only from the
    environment or ~/.aws; an object; default none.
    """
    return _source("tfrecord", locals())
