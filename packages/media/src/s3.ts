/** Result files in an S3-compatible bucket (`@mediagate/media/s3`); needs `@aws-sdk/client-s3` installed. */
export * as S3MediaStore from "./S3MediaStore.js"
