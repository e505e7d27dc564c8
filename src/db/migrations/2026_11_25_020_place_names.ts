import { type Kysely, sql } from 'kysely';
import { isPostgres } from './helpers.ts';

/**
 * Place names in one form (src/lib/place.ts): NFKC, format characters (zero-width spaces...) dropped, every
 * run of whitespace one space, trimmed; the constituency key case-folded too. Before, a silence period for
 * "North Delhi" missed voters stored as `North  Delhi`, `North\u00a0Delhi` or `North Delhi\u200b`. This
 * rewrites the stored voters' constituency, its key, booth and ward, and the silence periods' keys. Only rows
 * that can differ are read (a non-printable-ASCII character, a double space, or a space at either end), so a
 * clean roll of millions costs one scan. The functions are a frozen copy: migrations import nothing.
 */
const INVISIBLE = /\p{Cf}/gu;
const SPACES = /[\s\p{Zs}]+/gu;
const placeText = (value: string) =>
  value.normalize('NFKC').replace(INVISIBLE, '').replace(SPACES, ' ').trim();
const BATCH = 1000;

export async function up(db: Kysely<unknown>): Promise<void> {
  const pg = isPostgres(db);
  const messy = (column: string) => {
    const c = sql.ref(column);
    return pg
      ? sql`(${c} ~ '[^ -~]' OR ${c} LIKE '%  %' OR ${c} <> btrim(${c}))`
      : sql`(${c} GLOB '*[^ -~]*' OR ${c} LIKE '%  %' OR ${c} <> trim(${c}))`;
  };
  const k = db as Kysely<{
    voters: {
      id: number;
      constituency: string | null;
      constituency_key: string | null;
      booth: string | null;
      ward: string | null;
    };
    silence_periods: { id: number; constituency: string; constituency_key: string };
  }>;
  for (let after = 0; ;) {
    const rows = await k
      .selectFrom('voters')
      .select(['id', 'constituency', 'booth', 'ward'])
      .where('id', '>', after)
      .where(sql<boolean>`(${messy('constituency')} OR ${messy('booth')} OR ${messy('ward')})`)
      .orderBy('id')
      .limit(BATCH)
      .execute();
    if (rows.length === 0) break;
    for (const row of rows) {
      const constituency = row.constituency === null ? null : placeText(row.constituency) || null;
      await k
        .updateTable('voters')
        .set({
          constituency,
          constituency_key: constituency?.toLowerCase() ?? null,
          booth: row.booth === null ? null : placeText(row.booth) || null,
          ward: row.ward === null ? null : placeText(row.ward) || null,
        })
        .where('id', '=', row.id)
        .execute();
    }
    after = rows[rows.length - 1]!.id;
  }
  const periods = await k
    .selectFrom('silence_periods')
    .select(['id', 'constituency'])
    .where(sql<boolean>`${messy('constituency')}`)
    .execute();
  for (const period of periods) {
    const constituency = placeText(period.constituency) || period.constituency.trim();
    await k
      .updateTable('silence_periods')
      .set({ constituency, constituency_key: constituency.toLowerCase() })
      .where('id', '=', period.id)
      .execute();
  }
}

/** Nothing to undo: the normalised names are the same names. */
export async function down(): Promise<void> {}
