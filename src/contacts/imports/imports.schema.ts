import { Type, type Static } from 'typebox';
import { Timestamp } from '../../http/schemas.js';
import { ContactFilterQuery } from '../contacts.schema.js';

export const ImportQuery = Type.Object(
  {
    on_conflict: Type.Optional(
      Type.Enum(['update', 'skip'], {
        default: 'update',
        description:
          'What a row whose phone belongs to a contact does: `update` that contact (default) or `skip` the row (counted in `skipped`).',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ImportQuery = Static<typeof ImportQuery>;

export const ImportBody = Type.String({
  description:
    'UTF-8 CSV with a header row. Columns: `phone` (required, E.164), `name`, `email`, `tags` (separated by `;`), `lifecycle_stage` (`lead`, `customer`, `churned`), `custom_fields.<key>`.',
  examples: [
    'phone,name,email,tags,lifecycle_stage,custom_fields.plan\r\n+14155550123,Ada Lovelace,ada@example.com,vip;beta,customer,pro\r\n',
  ],
});

export const ImportStarted = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `imp_`.' }),
    status: Type.Literal('processing'),
  },
  { examples: [{ id: 'imp_01JD2Q8H3V6W9X0Y1Z2A3B4C5D', status: 'processing' }] },
);

const ImportRowError = Type.Object({
  line: Type.Integer({ description: "The row's line in the file (the header is line 1)." }),
  field: Type.String({
    description:
      'The column of the bad cell; `row` for a row with the wrong number of cells, `file` where the file stops being CSV.',
  }),
  issue: Type.String(),
});

export const ImportReport = Type.Object(
  {
    id: Type.String(),
    status: Type.Enum(['processing', 'completed', 'failed'], {
      description:
        '`failed` when the file stops being valid CSV (the rows before it stay imported and counted) or the import was stopped by an error of the service.',
    }),
    on_conflict: Type.Enum(['update', 'skip']),
    total_rows: Type.Integer({
      description: 'Data rows read so far; each is counted in exactly one of the four below.',
    }),
    created: Type.Integer(),
    updated: Type.Integer(),
    skipped: Type.Integer(),
    failed: Type.Integer(),
    errors: Type.Array(ImportRowError, {
      description:
        'The refused rows by line, one entry per bad cell (a row with one bad cell fails whole); at most 10,000 entries.',
    }),
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  {
    $id: 'ContactImport',
    examples: [
      {
        id: 'imp_01JD2Q8H3V6W9X0Y1Z2A3B4C5D',
        status: 'completed',
        on_conflict: 'update',
        total_rows: 1000,
        created: 970,
        updated: 20,
        skipped: 0,
        failed: 10,
        errors: [
          { line: 17, field: 'phone', issue: 'must be a valid E.164 number such as +14155550123' },
        ],
        created_at: '2026-11-27T18:00:00.000Z',
        updated_at: '2026-11-27T18:00:01.200Z',
      },
    ],
  },
);

export const ExportQuery = Type.Object({ ...ContactFilterQuery }, { additionalProperties: false });
export type ExportQuery = Static<typeof ExportQuery>;
