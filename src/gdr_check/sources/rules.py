"""GDR0xx: the rules raised while reading a checkpoint's metadata (config.json, index, safetensors headers).

Each rule here is one class: the rule's declaration and the fields of its message. The readers in
`gdr_check.sources` raise it (`MalformedIndexes(path, reason=...)`), a `SourceError` whose message is the rule's
template filled with the fields, so the text in docs, SARIF and the one-line error never drift apart; a field
the template names but the class lacks fails at import. Every one of them means the input could not
be read, so the run ends with exit 2, except GDR013 (an info note: the reader records its diagnostic and the
check goes on with what is there).

The rules live here, beside the readers that raise them, so that no reader imports anything above the sources
layer; their examples are data (`sources.examples`), run by `gdr_check.pipeline.example_runner`.

Numbering, stable once released:
    GDR001-GDR014  locating the input (paths, pickle files, the Hugging Face cache, links, Git LFS pointers)
    GDR020-GDR021  config.json
    GDR030-GDR038  safetensors headers
    GDR040-GDR045  the sharded-checkpoint index and its shards
"""

from __future__ import annotations

from pathlib import Path

from ..base.limits import INDEX_CAP_BASIS, INDEX_CAP_WHY, MAX_CONFIG_BYTES, MAX_INDEX_BYTES
from ..base.registry import declare
from ..base.source_error import SourceError
from .examples import CheckpointExample, Folder, Link, Safetensors, Sparse, tensor_entry

_SOURCE = "source"
# What a Git LFS clone without `git lfs` leaves in place of a file (GDR011's example).
_LFS_POINTER = ("version https://git-lfs.github.com/spec/v1\n"
                "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n")

# -- locating the input -----------------------------------------------------------------------------------


class MissingPaths(SourceError):
    rule = declare(
        "GDR001", "missing-paths", scope=_SOURCE,
        summary="path does not exist",
        message="path `{path}` does not exist",
        explanation=(
            "The path given on the command line does not exist and does not look like a Hugging Face repo id "
            "(`org/name`). Nothing can be checked without a checkpoint, a `config.json` or a known model."
        ),
        causes=["a typo in the path", "a relative path run from another working directory"],
        fixes=["check the path, or pass a Hugging Face repo id such as `Qwen/Qwen3-Next-80B-A3B-Instruct`"],
        example=CheckpointExample({}, "no/such/dir"),
    )

    path: str


class UnrecognizedInputs(SourceError):
    rule = declare(
        "GDR002", "unrecognized-inputs", scope=_SOURCE,
        summary="no checkpoint found",
        message="`{path}` is not a checkpoint: {reason}",
        explanation=(
            "gdr-check reads a `.safetensors` file, a `model.safetensors.index.json` with its shards, a model "
            "directory holding these (with or without `config.json`), a bare `config.json`, or a Hugging Face cache "
            "entry. The path exists but is none of these, so there is nothing to check."
        ),
        causes=[
            "a directory that holds only tokenizer or README files",
            "a file of another type (a GGUF file, a tarball)",
        ],
        fixes=["pass the model directory, its `config.json` or its `.safetensors` files"],
        example=CheckpointExample({"ck/README.md": "# a model", "ck/tokenizer.json": "{}"}, "ck"),
    )

    path: str
    reason: str

class PickleCheckpoints(SourceError):
    rule = declare(
        "GDR003", "pickle-checkpoints", scope=_SOURCE,
        summary="pickle-based checkpoint",
        message="unsupported pickle-based checkpoint `{file}`",
        explanation=(
            "`.bin`, `.pt` and `.pth` weights are Python pickles: loading one can run arbitrary code, and reading "
            "their shapes means unpickling them. gdr-check never unpickles anything, so only safetensors "
            "checkpoints (or a bare `config.json`) can be checked."
        ),
        causes=["an older export saved with `torch.save` or `save_pretrained(safe_serialization=False)`"],
        fixes=[
            "convert it to safetensors (e.g. with the `safetensors` convert script, or `transformers` "
            "`save_pretrained(..., safe_serialization=True)`) and check the converted directory",
            "check the `config.json` alone to get the shapes without a weight cross-check",
        ],
        example=CheckpointExample({"ck/consolidated.pth": "pickle"}, "ck/consolidated.pth"),
    )

    file: object


class UnreadableFiles(SourceError):
    rule = declare(
        "GDR004", "unreadable-files", scope=_SOURCE,
        summary="file cannot be read",
        message="cannot read `{file}`: {reason}",
        explanation=(
            "A file that the checkpoint needs could not be opened or read: missing permissions, an I/O error, or "
            "something that is not a regular file (a FIFO or a device), which gdr-check refuses so that it never "
            "blocks on a read."
        ),
        causes=["file permissions", "a FIFO or device node named like a checkpoint file", "an I/O error"],
        fixes=["fix the permissions (a folder needs search access), or point at a regular file the current user "
               "can read"],
        example=CheckpointExample({"ck/model.safetensors.index.json": '{"weight_map": {"w": "s.safetensors"}}',
                                  "ck/s.safetensors": Folder()}, "ck",
                                  "a shard that is a directory"),
    )

    file: object
    reason: str

class OversizedJsonFiles(SourceError):
    rule = declare(
        "GDR005", "oversized-json-files", scope=_SOURCE,
        summary="JSON metadata file over the size limit",
        message="{what} is {size} bytes, over the {limit}-byte limit",
        explanation=(
            "gdr-check caps how much it reads from `config.json` and `model.safetensors.index.json`, so that a "
            "hostile or corrupt file cannot make it use unbounded memory; a file over its cap is refused from its "
            f"size, unread. A real `config.json` is kilobytes (cap: {MAX_CONFIG_BYTES // 2**20} MiB).\n\n"
            f"The index's cap is {MAX_INDEX_BYTES // 2**20} MiB. {INDEX_CAP_WHY}"
        ),
        causes=["a weights file renamed to `config.json`", "a corrupt or hostile index file",
                "an index of millions of tensors, far past any released checkpoint"],
        fixes=["check that the file is the model's real `config.json`",
               f"the cap is {INDEX_CAP_BASIS} (docs/limits.md); if this one is genuine, check a "
               "folder holding only its `config.json` and report the index's size in a gdr-check issue"],
        example=CheckpointExample({"ck/config.json": Sparse(MAX_CONFIG_BYTES + 1)}, "ck",
                                  f"a {MAX_CONFIG_BYTES // 2**20} MiB + 1 byte config"),
    )

    what: object
    size: str
    limit: object


class UnresolvedCacheRevisions(SourceError):
    rule = declare(
        "GDR006", "unresolved-cache-revisions", scope=_SOURCE,
        summary="Hugging Face cache entry has no usable snapshot",
        message="cache entry `{repo}` has no usable snapshot for revision `{revision}`: {reason}",
        explanation=(
            "A Hugging Face cache entry (`models--org--name`) maps the revision `main` to a commit through "
            "`refs/main` and keeps that commit's files under `snapshots/<sha>/`. The ref or the snapshot is "
            "missing, so the files of the cached model cannot be found."
        ),
        causes=["an interrupted download", "a cache cleaned by hand", "a download of another revision only"],
        fixes=["download the model again (`hf download ORG/NAME`)"],
        example=CheckpointExample({"hub/models--Org--Gone/snapshots": Folder()}, "hub/models--Org--Gone",
                                 "a cache entry without refs/main or a snapshot"),
    )

    repo: object
    revision: str
    reason: object


class ModelNotFound(SourceError):
    rule = declare(
        "GDR007", "model-not-found", scope=_SOURCE,
        summary="model not in the local Hugging Face cache",
        message="`{repo_id}` is neither a local path nor a model in the local Hugging Face cache `{cache_dir}`",
        explanation=(
            "The target looks like a Hugging Face repo id and is not a local path, so it is looked up in the local "
            "cache (`$HF_HUB_CACHE`, else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`), where it is absent. "
            "Models with a built-in geometry are still checked from that description."
        ),
        causes=["the model was never downloaded on this machine", "the cache lives elsewhere (`HF_HOME`)"],
        fixes=["download it (`hf download ORG/NAME`), or set `HF_HUB_CACHE` to the cache that holds it"],
        example=CheckpointExample({"hub": Folder()}, "Org/Not-Downloaded", repo_id=True),
    )

    repo_id: object
    cache_dir: str

class IncompleteDownloads(SourceError):
    rule = declare(
        "GDR008", "incomplete-downloads", scope=_SOURCE,
        summary="file is a partial download",
        message="`{file}` is an incomplete download (`{blob}`)",
        explanation=(
            "The Hugging Face cache writes a file to `blobs/<hash>.incomplete` while it downloads and links the "
            "snapshot entry to the finished blob only at the end. This file still points at a partial blob, so its "
            "header and sizes cannot be trusted."
        ),
        causes=["an interrupted `hf download` or `from_pretrained`"],
        fixes=["run the download again; it resumes the partial file"],
        example=CheckpointExample({"hub/models--Org--Tiny/refs/main": "1a2b3c",
                                  "hub/models--Org--Tiny/snapshots/1a2b3c/model.safetensors": Link("../../blobs/abc"),
                                  "hub/models--Org--Tiny/blobs/abc.incomplete": b"partial"}, "Org/Tiny", repo_id=True),
    )

    file: object
    blob: str

class DanglingLinks(SourceError):
    rule = declare(
        "GDR009", "dangling-links", scope=_SOURCE,
        summary="link to a missing file",
        message="`{file}` is a link to `{link_target}`, which does not exist",
        explanation=(
            "The checkpoint file is a symbolic link whose target is missing, as happens in a Hugging Face cache "
            "when blobs are deleted or a download was interrupted, and in git-annex or DVC checkouts whose content "
            "was not fetched."
        ),
        causes=["a cache cleaned by hand", "an interrupted download", "`git annex get` or `dvc pull` not run"],
        fixes=["re-download the file the link stands for (`git annex get`, `dvc pull`), or fix the link"],
        example=CheckpointExample({"x.safetensors": Link("gone.safetensors")}, "x.safetensors"),
    )

    file: object
    link_target: str


class LinkLoops(SourceError):
    rule = declare(
        "GDR014", "link-loops", scope=_SOURCE,
        summary="links that never reach a file",
        message="`{file}` is a link to `{link_target}`, and following the links from there reaches no file",
        explanation=(
            "Following the checkpoint file's symbolic link and the links after it never reaches a file: they come "
            "back to a link already passed (a loop, here or in a folder on the way), or run longer than the "
            "operating system follows, which gives up with \"too many levels of symbolic links\". Nothing is "
            "missing; the links themselves are wrong."
        ),
        causes=["a link made relative to the wrong folder", "two files linked to each other by a sync or "
                "deduplication tool"],
        fixes=["replace one of the links with the real file, or point it at the real file"],
        example=CheckpointExample({"x.safetensors": Link("y.safetensors"), "y.safetensors": Link("x.safetensors")},
                                  "x.safetensors"),
    )

    file: object
    link_target: str


class LinksOutsideHfCacheBlobs(SourceError):
    rule = declare(
        "GDR010", "links-outside-hf-cache-blobs", scope=_SOURCE,
        summary="link where none is allowed",
        message="`{file}` is a link to `{link_target}`, outside {allowed}",
        explanation=(
            "gdr-check reads files from strangers, so by default it follows links only where the Hugging Face "
            "cache puts them: a snapshot file pointing into the same repository's `blobs/` directory. Any other "
            "link inside a checkpoint could make it read files the checkpoint does not own. Checkpoints kept as "
            "links on purpose (git-annex, DVC, shared storage) are read with `--follow-links`: still read-only, "
            "header-only and size-capped, the links are then followed wherever they point."
        ),
        causes=[
            "a checkpoint kept in git-annex or DVC, or assembled with symlinks to shared storage",
            "a hostile archive",
        ],
        fixes=[
            "pass `--follow-links` if the links are yours (git-annex, DVC, shared storage), or copy the real files "
            "into the checkpoint directory"
        ],
        example=CheckpointExample({"elsewhere.safetensors": Safetensors({"a": tensor_entry()}),
                                  "ck/model.safetensors": Link("../elsewhere.safetensors")}, "ck"),
    )

    file: object
    link_target: str
    allowed: object


class GitLfsPointers(SourceError):
    rule = declare(
        "GDR011", "git-lfs-pointers", scope=_SOURCE,
        summary="file is a Git LFS pointer",
        message="is a Git LFS pointer, not the weights",
        explanation=(
            "A repository that tracks its weights with Git LFS holds, in git itself, a small text pointer "
            "(`version https://git-lfs.github.com/spec/v1`, then the object's hash and size) in place of each large "
            "file. A clone made without `git lfs` installed, or with `GIT_LFS_SKIP_SMUDGE=1`, leaves these "
            "pointers on disk: they have the weights' names but none of their content. A Hugging Face cache entry "
            "that holds a pointer was filled by hand (a clone copied into `snapshots/`): the fix there is a "
            "fresh download."
        ),
        causes=["`git clone` of a model repository without `git lfs install`", "`GIT_LFS_SKIP_SMUDGE=1`",
                "a clone's files copied into the Hugging Face cache"],
        fixes=["run `git lfs pull` in the clone",
               "download the model again (`hf download ORG/NAME`): the cache holds the pointer"],
        example=CheckpointExample({"ck/config.json": _LFS_POINTER, "ck/model.safetensors": _LFS_POINTER}, "ck",
                                  "a clone made with GIT_LFS_SKIP_SMUDGE=1"),
    )

    @classmethod
    def at(cls, path: Path, cache_repo: Path | None) -> GitLfsPointers:
        """The error for a pointer at `path`: in a Hugging Face cache entry (`cache_repo`, `models--ORG--NAME`) the
        way to the file is a fresh download, not git."""
        if cache_repo is None:
            return cls(path)
        repo_id = cache_repo.name.removeprefix("models--").replace("--", "/")
        return cls(path, fix=cls.rule.fixes[1].replace("ORG/NAME", repo_id))


class MissingCacheRevisions(SourceError):
    rule = declare(
        "GDR012", "missing-cache-revisions", scope=_SOURCE,
        summary="revision not in the local Hugging Face cache",
        message="`{repo_id}` has no revision `{revision}` in the local Hugging Face cache (cached: {available})",
        explanation=(
            "`--revision REV` or `org/name@REV` picks one snapshot of a cached model: a branch or tag the cache "
            "has a ref for (`refs/REV`), or a commit hash or a prefix of one naming a snapshot. The cache holds "
            "none of these for the revision asked for; gdr-check never downloads, so it cannot fetch it."
        ),
        causes=["the revision was never downloaded on this machine", "a typo in the branch, tag or hash"],
        fixes=["download that revision (`hf download ORG/NAME --revision REV`), or pick one of the cached revisions"],
        example=CheckpointExample({"hub/models--Org--Tiny/refs/main": "1a2b3c4d",
                                   "hub/models--Org--Tiny/snapshots/1a2b3c4d/model.safetensors":
                                       Safetensors({"a": tensor_entry()})},
                                  "Org/Tiny@v2", "only `main` is cached", repo_id=True),
    )

    repo_id: object
    revision: object
    available: object


class IndexWithoutShards(SourceError):
    rule = declare(
        "GDR013", "index-without-shards", scope=_SOURCE, severity="info",
        summary="safetensors index present, shards not downloaded",
        message=(
            "none of the {shards} shard(s) listed in `{index}` is present: checked from `config.json` alone "
            "({tensors} tensor names in the index, no shapes read)"
        ),
        explanation=(
            "A download of the JSON files only (`hf download ORG/NAME --include \"*.json\"`) is a common way to "
            "look at a large model: it has the config and the index but no shard. gdr-check then checks the "
            "geometry the config gives, and notes that no tensor shape was cross-checked. When the directory holds "
            "any safetensors file, a shard the index lists but lacks is a missing shard instead (GDR043)."
        ),
        causes=["a download restricted to `*.json`"],
        fixes=["download the shards too to cross-check the weights' shapes"],
        example=CheckpointExample({"ck/config.json": "{}", "ck/model.safetensors.index.json":
                                   '{"weight_map": {"a": "model-00001-of-00002.safetensors", '
                                   '"b": "model-00002-of-00002.safetensors"}}'},
                                  "ck", "config and index downloaded, no shard"),
    )

    shards: object
    index: object
    tensors: object


# -- config.json ------------------------------------------------------------------------------------------


class InvalidConfigJson(SourceError):
    rule = declare(
        "GDR020", "invalid-config-json", scope=_SOURCE,
        summary="config.json is not valid JSON",
        message="invalid JSON at line {line}, column {column}: {reason}",
        explanation=(
            "The model's `config.json` cannot be parsed as UTF-8 JSON, so the layer map and head counts cannot be "
            "read. Transformers and the serving engines would fail to load it too."
        ),
        causes=["a hand edit that left a trailing comma or a missing quote", "a truncated copy"],
        fixes=["fix the JSON at the reported line and column, or download `config.json` again"],
        example=CheckpointExample({"ck/config.json": '{\n  "a": 1,\n  "b" 2\n}\n'}, "ck"),
    )

    line: int
    column: int
    reason: object


class NonObjectConfigs(SourceError):
    rule = declare(
        "GDR021", "non-object-configs", scope=_SOURCE,
        summary="config.json is not a JSON object",
        message="config holds a JSON {json_type}, not an object",
        explanation=(
            "A model config is a JSON object of named fields. This file parses, but its top level is a list, a "
            "string or a number, so no field can be read from it."
        ),
        causes=["the wrong file saved as `config.json` (e.g. a list of generation configs)"],
        fixes=["replace it with the model's real `config.json`"],
        example=CheckpointExample({"ck/config.json": "[1, 2]"}, "ck"),
    )

    json_type: object


# -- safetensors headers ----------------------------------------------------------------------------------


class TruncatedSafetensorsFiles(SourceError):
    rule = declare(
        "GDR030", "truncated-safetensors-files", scope=_SOURCE,
        summary="safetensors file is truncated",
        message="safetensors file is truncated: {actual_size} bytes on disk, {expected_size} expected ({detail})",
        explanation=(
            "A safetensors file is an 8-byte little-endian header length N, N bytes of JSON header, then the "
            "tensor data, whose end the header gives. This file ends before that point, which means a partial "
            "download or copy: some tensors are missing or cut short."
        ),
        causes=["an interrupted download or copy", "a full disk while saving"],
        fixes=["re-download or re-copy this file"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry()}, size=72)}, "x.safetensors"),
    )

    actual_size: object
    expected_size: str
    detail: object


class OversizedSafetensorsHeaders(SourceError):
    rule = declare(
        "GDR031", "oversized-safetensors-headers", scope=_SOURCE,
        summary="safetensors header length over the limit",
        message="header length {length} exceeds the {limit}-byte limit",
        explanation=(
            "The first 8 bytes of a safetensors file give the length of its JSON header. Real headers are at most "
            "a few megabytes; the safetensors library itself refuses more than 100 MB. A larger value means the "
            "file is not a safetensors file or its first bytes are corrupt, so gdr-check reads nothing further."
        ),
        causes=["a file of another format renamed to `.safetensors`", "a corrupt first block"],
        fixes=["check that the file is a safetensors file, and re-download it if it is"],
        example=CheckpointExample({"x.safetensors": Safetensors(b"{}", 0, length=2 ** 64 - 1)}, "x.safetensors"),
    )

    length: object
    limit: str

class MalformedSafetensorsHeaders(SourceError):
    rule = declare(
        "GDR032", "malformed-safetensors-headers", scope=_SOURCE,
        summary="safetensors header is malformed",
        message="malformed safetensors header: {reason}",
        explanation=(
            "The header must be UTF-8 JSON: one object mapping each tensor name to `dtype`, `shape` and "
            "`data_offsets`, plus an optional `__metadata__` map of strings, with no duplicate names. This header "
            "breaks that format, so its tensors cannot be described."
        ),
        causes=["a corrupt file", "a writer that does not follow the safetensors format"],
        fixes=["re-download the file, or re-save it with the `safetensors` library"],
        example=CheckpointExample({"x.safetensors": Safetensors(b"[1, 2]", 0)}, "x.safetensors"),
    )

    reason: object
    tensor: str

class UnknownTensorDtypes(SourceError):
    rule = declare(
        "GDR033", "unknown-tensor-dtypes", scope=_SOURCE,
        summary="tensor has an unknown dtype",
        message="tensor `{tensor}` has unknown dtype `{dtype}`",
        explanation=(
            "Safetensors names its dtypes `F32`, `BF16`, `F8_E4M3`, `I64` and so on. This tensor's dtype is none "
            "of them, so its byte size, and therefore the layout of the whole file, cannot be checked."
        ),
        causes=["a corrupt header", "a writer using a dtype newer than this gdr-check"],
        fixes=["re-save the checkpoint with the `safetensors` library, or upgrade gdr-check"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry(dtype="Q4_K")})}, "x.safetensors"),
    )

    tensor: str
    dtype: str

class InvalidTensorShapes(SourceError):
    rule = declare(
        "GDR034", "invalid-tensor-shapes", scope=_SOURCE,
        summary="tensor has an invalid shape",
        message="tensor `{tensor}` has invalid shape `{shape}`: {reason}",
        explanation=(
            "A tensor shape is a list of non-negative integers that fit in 64 bits. This one holds something "
            "else (a negative, fractional, overflowing or non-numeric entry), so the tensor cannot be described."
        ),
        causes=["a corrupt header", "a writer bug"],
        fixes=["re-download the file, or re-save it with the `safetensors` library"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry(shape=(-2, -1))})}, "x.safetensors"),
    )

    tensor: str
    shape: str
    reason: object


class TensorSizeMismatches(SourceError):
    rule = declare(
        "GDR035", "tensor-size-mismatches", scope=_SOURCE,
        summary="tensor byte span does not match its shape and dtype",
        message="tensor `{tensor}` spans {span} bytes but its shape and dtype need {expected}",
        explanation=(
            "A tensor's `data_offsets` [begin, end) must cover exactly prod(shape) x itemsize bytes. When they do "
            "not, the shape or dtype in the header is wrong, or the data belongs to another tensor, and any shape "
            "checked from this header would be misleading."
        ),
        causes=["a header edited by hand (e.g. a shape changed without re-saving)", "a writer bug"],
        fixes=["re-save the tensor with the `safetensors` library"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry(dtype="BF16", shape=(3,))})},
                                 "x.safetensors"),
    )

    tensor: str
    span: str
    expected: object


class OverlappingTensors(SourceError):
    rule = declare(
        "GDR036", "overlapping-tensors", scope=_SOURCE,
        summary="tensors overlap in the data region",
        message="tensors `{tensor}` and `{other}` overlap in the data region",
        explanation=(
            "Each tensor must own its bytes of the data region. Two tensors whose `data_offsets` overlap alias "
            "each other's data, which the safetensors format forbids and which usually means a corrupt header."
        ),
        causes=["a corrupt header", "a header edited by hand"],
        fixes=["re-save the checkpoint with the `safetensors` library"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry(offsets=(0, 8)),
                                                                "b": tensor_entry(offsets=(4, 12))})}, "x.safetensors"),
    )

    tensor: str
    other: str

class InvalidDataOffsets(SourceError):
    rule = declare(
        "GDR037", "invalid-data-offsets", scope=_SOURCE,
        summary="tensor data offsets are invalid",
        message="tensor `{tensor}` has invalid `data_offsets` `{offsets}`: {reason}",
        explanation=(
            "`data_offsets` is a pair of integers [begin, end) relative to the start of the data region, with "
            "begin <= end; sorted by offset, the tensors must tile the data region from 0 with no gaps. These "
            "offsets break that rule, so the header does not describe the file's data."
        ),
        causes=["a corrupt header", "a writer bug"],
        fixes=["re-save the checkpoint with the `safetensors` library"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry(offsets=(8, 0))}, 8)},
                                  "x.safetensors"),
    )

    tensor: str
    offsets: str
    reason: object


class OversizedSafetensorsFiles(SourceError):
    rule = declare(
        "GDR038", "oversized-safetensors-files", scope=_SOURCE,
        summary="safetensors file has bytes after its tensor data",
        message=(
            "safetensors file has {extra} unexpected bytes after its tensor data: {actual_size} bytes on disk, "
            "{expected_size} expected"
        ),
        explanation=(
            "The size of a safetensors file is fully determined by its header: 8 + header length + the end of the "
            "last tensor. This file is longer, so its header does not describe all of its contents (the "
            "safetensors library rejects such files)."
        ),
        causes=["two downloads written into the same file", "a header rewritten with fewer tensors"],
        fixes=["re-download the file, or re-save it with the `safetensors` library"],
        example=CheckpointExample({"x.safetensors": Safetensors({"a": tensor_entry()}, size=100)}, "x.safetensors"),
    )

    extra: object
    actual_size: str
    expected_size: object


# -- index and shards -------------------------------------------------------------------------------------


class InvalidIndexJson(SourceError):
    rule = declare(
        "GDR040", "invalid-index-json", scope=_SOURCE,
        summary="safetensors index is not valid JSON",
        message="invalid JSON at line {line}, column {column}: {reason}",
        explanation=(
            "`model.safetensors.index.json` maps every tensor name to the shard file that holds it. It cannot be "
            "parsed as UTF-8 JSON, so the shards cannot be found."
        ),
        causes=["a truncated download", "a hand edit"],
        fixes=["download `model.safetensors.index.json` again"],
        example=CheckpointExample({"ck/model.safetensors.index.json": '{"weight_map": {"w" "s.safetensors"}}'}, "ck"),
    )

    line: int
    column: int
    reason: object


class MalformedIndexes(SourceError):
    rule = declare(
        "GDR041", "malformed-indexes", scope=_SOURCE,
        summary="safetensors index is malformed",
        message="malformed safetensors index: {reason}",
        explanation=(
            "The index must be a JSON object whose `weight_map` maps each tensor name to a shard file name (a "
            "string). This index parses but does not have that form."
        ),
        causes=["an index written by a tool that does not follow the format", "the wrong file in place of the index"],
        fixes=["download `model.safetensors.index.json` again, or regenerate it with `save_pretrained`"],
        example=CheckpointExample({"ck/model.safetensors.index.json": '{"metadata": {}}'}, "ck"),
    )

    reason: object


class ShardPathsOutsideCheckpoint(SourceError):
    rule = declare(
        "GDR042", "shard-paths-outside-checkpoint", scope=_SOURCE,
        summary="shard name is not a plain file name",
        message="shard name `{shard}` for tensor `{tensor}` is not a plain file name inside the checkpoint directory",
        explanation=(
            "Shard names in `weight_map` are file names in the checkpoint directory. A name with a path "
            "separator, a `..` component or an absolute path could make a reader open files outside the "
            "checkpoint, so gdr-check refuses the index instead of following it."
        ),
        causes=["a hostile index", "an index hand-edited to point at shards elsewhere"],
        fixes=["move the shards into the checkpoint directory and list them by file name only"],
        example=CheckpointExample({"ck/model.safetensors.index.json": '{"weight_map": {"w": "../s.safetensors"}}'},
                                  "ck"),
    )

    shard: str
    tensor: str

class MissingShards(SourceError):
    rule = declare(
        "GDR043", "missing-shards", scope=_SOURCE,
        summary="shard listed in the index is missing",
        message="shard `{shard}` listed in the index does not exist",
        explanation=(
            "The index maps tensors to a shard file that is not in the checkpoint directory, so those tensors "
            "cannot be checked and no engine could load the model."
        ),
        causes=["an interrupted or partial download (e.g. `--include` patterns)", "a shard deleted by hand"],
        fixes=["re-download the missing shard"],
        example=CheckpointExample({"ck/model.safetensors.index.json": '{"weight_map": {"a": "s1.safetensors", '
                                                                       '"b": "s2.safetensors"}}',
                                   "ck/s1.safetensors": Safetensors({"a": tensor_entry()})}, "ck",
                                  "the second shard is missing"),
    )

    shard: str


class TensorsMissingFromShards(SourceError):
    rule = declare(
        "GDR044", "tensors-missing-from-shards", scope=_SOURCE,
        summary="index maps a tensor to a shard that does not hold it",
        message="tensor `{tensor}` is mapped to `{shard}`, whose header does not contain it",
        explanation=(
            "Every tensor in the index's `weight_map` must be present in the header of the shard it maps to. "
            "Otherwise the index and the shards come from different exports, and a loader would fail or load the "
            "wrong weights."
        ),
        causes=["shards from one export mixed with the index of another", "a hand-edited index"],
        fixes=["download the index and all shards of one revision again"],
        example=CheckpointExample({"ck/model.safetensors.index.json": '{"weight_map": {"w": "s.safetensors"}}',
                                  "ck/s.safetensors": Safetensors({"a": tensor_entry()})}, "ck"),
    )

    tensor: str
    shard: str

class DuplicateTensors(SourceError):
    rule = declare(
        "GDR045", "duplicate-tensors", scope=_SOURCE,
        summary="tensor stored in more than one file",
        message="tensor `{tensor}` is stored in both `{shard}` and `{other_shard}`",
        explanation=(
            "Each tensor name must be stored once. When two files of a checkpoint hold the same name, which one "
            "an engine loads depends on its load order, so the checked shapes may not be the ones served."
        ),
        causes=["shards from two exports in one directory", "an old single-file export left next to new shards"],
        fixes=["remove the stale file so that each tensor is stored once"],
        example=CheckpointExample({"ck/a.safetensors": Safetensors({"w": tensor_entry()}),
                                  "ck/b.safetensors": Safetensors({"w": tensor_entry()})}, "ck"),
    )

    tensor: str
    shard: str
    other_shard: object
