/**
 * What a suite whose cases on the signature-checking S3 server do not run logs before its
 * name (`checkingS3SkipReason` of CheckingS3.ts). A module with no imports, like
 * pgSkipMarker.ts of store-sql: the run's configuration and its summary reporter
 * (scripts/run-summary/reporter.ts) read it in vitest's main process.
 */
export const s3SkipMarker = "[S3 signature cases not run] "
