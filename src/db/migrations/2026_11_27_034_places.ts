import { type Kysely, sql } from 'kysely';
import { bigintType, isPostgres, timestampType, withId } from './helpers.ts';

/**
 * Places (the contract's fourth part, "Places"): a workspace's constituencies, wards and booths with their
 * aliases. `place_names` holds every name and alias of a place in the place-name normal form, case-folded
 * (src/lib/place.ts `placeKey`), under one key per workspace and kind: a name used twice is refused by the
 * key, not by a read-then-write.
 *
 * Voters get `ward_key` and `booth_key` (as `constituency_key`): ward and booth filters, segments and
 * coverage compare case-folded, so `Ward 12` and `ward 12` are one ward. The filter indexes move to the keys.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await createPlaces(db);
  await addPlaceKeys(db);
}

/** Places, their other spellings, and the unknown places of an import job. */
async function createPlaces(db: Kysely<unknown>): Promise<void> {
  const ts = timestampType(db);
  const ref = bigintType(db);
  await withId(db, db.schema.createTable('places'))
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('aliases', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('code', 'text')
    .addColumn('created_at', ts, (c) => c.notNull())
    .addColumn('updated_at', ts, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('places_workspace_idx')
    .on('places')
    .columns(['workspace_id', 'kind', 'id'])
    .execute();
  await db.schema
    .createTable('place_names')
    .addColumn('workspace_id', ref, (c) => c.notNull().references('workspaces.id').onDelete('cascade'))
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('place_id', ref, (c) => c.notNull().references('places.id').onDelete('cascade'))
    .addPrimaryKeyConstraint('place_names_pk', ['workspace_id', 'kind', 'key'])
    .execute();
  await db.schema.createIndex('place_names_place_idx').on('place_names').columns(['place_id']).execute();

  // An import job's answer lists the file's values that match no place.
  await db.schema
    .alterTable('voter_imports')
    .addColumn('unknown_places', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
}

/** The voters' ward and booth keys (their case-folded forms), filled, and the place indexes on them. */
async function addPlaceKeys(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voters').addColumn('ward_key', 'text').execute();
  await db.schema.alterTable('voters').addColumn('booth_key', 'text').execute();
  // Stored values are already in the normal form (migration 020): ASCII rows fold in SQL; the others (few in
  // a roll, and those mostly in scripts without case) are folded here as the application folds them.
  await sql`UPDATE voters SET ward_key = lower(ward), booth_key = lower(booth)
    WHERE ward IS NOT NULL OR booth IS NOT NULL`.execute(db);
  const pg = isPostgres(db);
  const nonAscii = (column: string) =>
    pg ? sql`${sql.ref(column)} ~ '[^ -~]'` : sql`${sql.ref(column)} GLOB '*[^ -~]*'`;
  const k = db as Kysely<{ voters: { id: number; ward: string | null; booth: string | null } }>;
  for (let after = 0; ;) {
    const rows = await k
      .selectFrom('voters')
      .select(['id', 'ward', 'booth'])
      .where('id', '>', after)
      .where(sql<boolean>`(${nonAscii('ward')} OR ${nonAscii('booth')})`)
      .orderBy('id')
      .limit(1000)
      .execute();
    if (rows.length === 0) break;
    for (const row of rows)
      await sql`UPDATE voters SET ward_key = ${row.ward?.toLowerCase() ?? null},
        booth_key = ${row.booth?.toLowerCase() ?? null} WHERE id = ${row.id}`.execute(db);
    after = rows[rows.length - 1]!.id;
  }
  for (const name of ['voters_constituency_idx', 'voters_ward_idx', 'voters_booth_idx', 'voters_ward_id_idx'])
    await db.schema.dropIndex(name).execute();
  await db.schema
    .createIndex('voters_constituency_idx')
    .on('voters')
    .columns(['workspace_id', 'constituency_key', 'ward_key', 'booth_key'])
    .execute();
  await db.schema
    .createIndex('voters_ward_idx')
    .on('voters')
    .columns(['workspace_id', 'ward_key', 'booth_key'])
    .execute();
  await db.schema
    .createIndex('voters_booth_idx')
    .on('voters')
    .columns(['workspace_id', 'booth_key'])
    .execute();
  await db.schema
    .createIndex('voters_ward_id_idx')
    .on('voters')
    .columns(['workspace_id', 'ward_key', 'id'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  for (const name of ['voters_constituency_idx', 'voters_ward_idx', 'voters_booth_idx', 'voters_ward_id_idx'])
    await db.schema.dropIndex(name).execute();
  await db.schema
    .createIndex('voters_constituency_idx')
    .on('voters')
    .columns(['workspace_id', 'constituency_key', 'ward', 'booth'])
    .execute();
  await db.schema
    .createIndex('voters_ward_idx')
    .on('voters')
    .columns(['workspace_id', 'ward', 'booth'])
    .execute();
  await db.schema.createIndex('voters_booth_idx').on('voters').columns(['workspace_id', 'booth']).execute();
  await db.schema
    .createIndex('voters_ward_id_idx')
    .on('voters')
    .columns(['workspace_id', 'ward', 'id'])
    .execute();
  await db.schema.alterTable('voter_imports').dropColumn('unknown_places').execute();
  await db.schema.alterTable('voters').dropColumn('booth_key').execute();
  await db.schema.alterTable('voters').dropColumn('ward_key').execute();
  await db.schema.dropTable('place_names').execute();
  await db.schema.dropTable('places').execute();
}
