import { sql } from 'kysely';
import { compiledOnce } from '../../db/compiled-once.ts';
import { nowIso } from '../../db/connect.ts';
import type { Executor } from '../../db/types.ts';
import type { Tag } from './voter-record.rules.ts';
import { type FieldValue, shownValue, type StoredValue, type VoterFieldDef } from './voter-fields.ts';

/** Tags and custom field values of voters: rows of voter_tags and voter_field_values (migration 035). */

/**
 * The tags' keys, with the label each was first written with recorded (a key already named keeps its name).
 * Returns the labels as the workspace shows them.
 */
export async function nameTags(db: Executor, workspaceId: number, tags: readonly Tag[]): Promise<string[]> {
  if (tags.length === 0) return [];
  await db
    .insertInto('voter_tag_names')
    .values(tags.map((t) => ({ workspace_id: workspaceId, key: t.key, label: t.label })))
    .onConflict((oc) => oc.columns(['workspace_id', 'key']).doNothing())
    .execute();
  const rows = await db
    .selectFrom('voter_tag_names')
    .select(['key', 'label'])
    .where('workspace_id', '=', workspaceId)
    .where(
      'key',
      'in',
      tags.map((t) => t.key),
    )
    .execute();
  const labels = new Map(rows.map((r) => [r.key, r.label]));
  return tags.map((t) => labels.get(t.key) ?? t.label);
}

/** Replaces a voter's tags with `tags`. */
export async function setTags(db: Executor, workspaceId: number, voterId: number, tags: readonly Tag[]) {
  await nameTags(db, workspaceId, tags);
  await db.deleteFrom('voter_tags').where('voter_id', '=', voterId).execute();
  if (tags.length > 0)
    await db
      .insertInto('voter_tags')
      .values(tags.map((t) => ({ workspace_id: workspaceId, tag_key: t.key, voter_id: voterId })))
      .execute();
}

export const byLabel = (a: string, b: string) => {
  const x = a.toLowerCase();
  const y = b.toLowerCase();
  return x < y ? -1 : x > y ? 1 : a < b ? -1 : a > b ? 1 : 0;
};

/** Each voter's tags as the workspace shows them, in name order (case-insensitive). */
/**
 * A workspace column compared without its index. A page's tags and field values are found by voter id; with
 * `workspace_id = ?` as it is, SQLite (until the tables have statistics) took the index that starts with the
 * workspace and read every tag or value of the workspace for each page or voter: 12 ms with 357,000 tags, 30
 * ms with a million values, against a few lookups. The check stays (the ids are the workspace's already).
 */
const notIndexed = (column: 't.workspace_id' | 'workspace_id') => sql<number>`(${sql.ref(column)} + 0)`;

const tagsQuery = (db: Executor) =>
  db
    .selectFrom('voter_tags as t')
    .innerJoin('voter_tag_names as n', (j) =>
      j.onRef('n.workspace_id', '=', 't.workspace_id').onRef('n.key', '=', 't.tag_key'),
    )
    .select(['t.voter_id', 'n.label']);

/** One voter's (`GET /api/voters/{id}`): built and compiled once (db/compiled-once.ts). */
const tagsOfOne = compiledOnce((db, workspaceId: number, voterId: number) =>
  tagsQuery(db).where('t.voter_id', '=', voterId).where(notIndexed('t.workspace_id'), '=', workspaceId),
);

export async function tagsOf(
  db: Executor,
  workspaceId: number,
  voterIds: readonly number[],
): Promise<Map<number, string[]>> {
  const out = new Map<number, string[]>(voterIds.map((id) => [id, []]));
  if (voterIds.length === 0) return out;
  const rows =
    voterIds.length === 1
      ? await tagsOfOne.all(db, workspaceId, voterIds[0]!)
      : await tagsQuery(db)
          .where('t.voter_id', 'in', [...voterIds])
          .where(notIndexed('t.workspace_id'), '=', workspaceId)
          .execute();
  for (const r of rows) out.get(Number(r.voter_id))?.push(r.label);
  // In one order on either database (collations differ): case-insensitive, then as written.
  for (const tags of out.values()) tags.sort(byLabel);
  return out;
}

/** Writes a voter's field values: a value replaces the field's, null deletes it; fields not named are kept. */
export async function setFieldValues(
  db: Executor,
  workspaceId: number,
  voterId: number,
  values: ReadonlyMap<string, StoredValue | null>,
) {
  const cleared = [...values].filter(([, v]) => v === null).map(([k]) => k);
  const set = [...values].filter((e): e is [string, StoredValue] => e[1] !== null);
  if (cleared.length > 0)
    await db
      .deleteFrom('voter_field_values')
      .where('voter_id', '=', voterId)
      .where('field_key', 'in', cleared)
      .execute();
  if (set.length > 0)
    await db
      .insertInto('voter_field_values')
      .values(set.map(([key, v]) => ({ voter_id: voterId, workspace_id: workspaceId, field_key: key, ...v })))
      .onConflict((oc) =>
        oc.columns(['voter_id', 'field_key']).doUpdateSet((eb) => ({
          value_text: eb.ref('excluded.value_text'),
          value_number: eb.ref('excluded.value_number'),
        })),
      )
      .execute();
  // When each field changed (field work's conflicts): a changed value is stamped by a trigger too, a value given to
  // an empty field only here (migration 043).
  const at = nowIso();
  if (values.size > 0)
    await db
      .insertInto('voter_stamps')
      .values([...values.keys()].map((key) => ({ voter_id: voterId, field: `fields.${key}`, at })))
      .onConflict((oc) => oc.columns(['voter_id', 'field']).doUpdateSet({ at }))
      .execute();
}

const valuesQuery = (db: Executor) =>
  db.selectFrom('voter_field_values').select(['voter_id', 'field_key', 'value_text', 'value_number']);

const valuesOfOne = compiledOnce((db, workspaceId: number, voterId: number) =>
  valuesQuery(db).where('voter_id', '=', voterId).where(notIndexed('workspace_id'), '=', workspaceId),
);

/** Each voter's custom field values `{ key: value }`, leaving out the keys in `hidden`. */
export async function fieldValuesOf(
  db: Executor,
  workspaceId: number,
  voterIds: readonly number[],
  defs: readonly VoterFieldDef[],
  hidden: ReadonlySet<string> = new Set(),
): Promise<Map<number, Record<string, FieldValue | null>>> {
  const out = new Map<number, Record<string, FieldValue | null>>(voterIds.map((id) => [id, {}]));
  if (voterIds.length === 0 || defs.length === 0) return out;
  const byKey = new Map(defs.map((d) => [d.key, d]));
  const rows =
    voterIds.length === 1
      ? await valuesOfOne.all(db, workspaceId, voterIds[0]!)
      : await valuesQuery(db)
          .where('voter_id', 'in', [...voterIds])
          .where(notIndexed('workspace_id'), '=', workspaceId)
          .execute();
  for (const r of rows) {
    const def = byKey.get(r.field_key);
    if (!def || hidden.has(r.field_key)) continue;
    const value = shownValue(def, {
      value_text: r.value_text,
      value_number: r.value_number === null ? null : Number(r.value_number),
    });
    const fields = out.get(Number(r.voter_id));
    if (fields) fields[r.field_key] = value;
  }
  return out;
}

/** Adds one tag (by key, already named) to a voter; a tag it has already stays as it is. */
export async function addTag(
  db: Executor,
  workspaceId: number,
  voterId: number,
  tagKey: string,
): Promise<void> {
  await db
    .insertInto('voter_tags')
    .values({ workspace_id: workspaceId, tag_key: tagKey, voter_id: voterId })
    .onConflict((oc) => oc.doNothing())
    .execute();
}
