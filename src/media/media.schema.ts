import { Type, type Static } from 'typebox';

/** An uploaded file, as `POST /v1/media` answers. */
export const UploadedMedia = Type.Object(
  {
    id: Type.String({
      description: 'Prefixed `med_`; give it as `media_id` to `POST /v1/messages/send`.',
    }),
    content_type: Type.String({ description: "What the file's bytes show it to be." }),
    size: Type.Integer({ minimum: 1, description: 'In bytes.' }),
    filename: Type.String({
      description:
        "The part's file name without its path, its extension set to the detected type's (`scan.pdf` holding a PNG is kept as `scan.png`).",
    }),
  },
  {
    $id: 'UploadedMedia',
    examples: [
      {
        id: 'med_01J9Z3Q4W7ZK4S5V2N8C6B1XQA',
        content_type: 'image/png',
        size: 48213,
        filename: 'receipt.png',
      },
    ],
  },
);
export type UploadedMedia = Static<typeof UploadedMedia>;

/** The multipart form of `POST /v1/media`, for the document (the upload reader checks it). */
export const UploadForm = Type.Object(
  {
    file: Type.String({
      format: 'binary',
      description:
        'The file (one part named `file`, up to MEDIA_MAX_BYTES, 16 MiB by default): JPEG, PNG, WebP, PDF, Word, Excel, PowerPoint (legacy or Office Open XML) or OpenDocument, told by its bytes.',
    }),
  },
  { additionalProperties: false },
);
