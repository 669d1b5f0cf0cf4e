// Package bulk copies files between a local filesystem and a grid's
// buckets through the gateway's S3 API, as StoRM and GridFTP did for
// programs: many files and many segments of each file in flight at
// once, resumable after an interruption, a total bandwidth limit, and
// every byte checked end to end by SHA-256. It is what `quilt cp` runs.
//
// An upload of a file larger than one part is an S3 multipart upload
// whose parts each carry x-amz-checksum-sha256, which the gateway checks
// before it stores the part; the SHA-256 of the whole file is computed
// first (one sequential read) and kept as the object's user metadata
// "sha256" (x-amz-meta-sha256, hex), beside "mtime" and "mode" in the
// form the file tree uses. Its progress is a checkpoint file in
// Config.StateDir (the upload ID, part size, the source's size and
// modification time, and each part done with its ETag and checksum): a
// second run with the same source and destination checks the source is
// unchanged, confirms the parts with ListParts, sends only the missing
// ones and completes the upload.
//
// A download fetches ranges in parallel into DEST.quilt-cp-partial,
// recording the ranges done in DEST.quilt-cp-partial.json; once whole,
// the file is hashed and compared with the object's SHA-256 (its "sha256"
// metadata, else its full-object x-amz-checksum-sha256, else the MD5 of a
// single-part ETag) before it is renamed into place. A mismatch removes
// the partial file and returns ErrChecksum: nothing is left at the
// destination.
//
// A Copier is safe for one Run at a time; its Limiter may be shared.
package bulk
