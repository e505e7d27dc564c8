import { nowIso } from '../../db/connect.ts';
import type { VisitRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import type { FieldErrors } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { visitRef } from '../../refs.ts';
import { type AuditEntry, recordAudits } from '../audit/audit.repository.ts';
import { storeVisitResponse, type VisitAnswers } from '../surveys/survey-visits.ts';
import type { StoredValue } from '../voters/voter-fields.ts';
import { nameTags, setFieldValues } from '../voters/voter-record.repository.ts';
import type { Tag } from '../voters/voter-record.rules.ts';
import type { Outcome } from './field.schemas.ts';

/**
 * A batch of visits stored in one transaction, in a few statements whatever its size (500 visits in one request
 * took 1.1 s on PostgreSQL a visit at a time): the visits in one INSERT, the voters' stamps in one read, the
 * support levels in an UPDATE per level, the tags in one INSERT, the stamps, touches and audit entries in one each.
 * Only custom field values (per voter) and survey answers (per visit) are written one by one.
 */

export interface VisitBody {
  client_id: string;
  voter_id: number;
  outcome: Outcome;
  support_level?: number | undefined;
  tags_add?: string[] | undefined;
  fields?: Record<string, unknown> | undefined;
  note?: string | undefined;
  survey_id?: string | undefined;
  answers?: Record<string, unknown> | undefined;
  visited_at: string;
  location?: { lat: number; lon: number } | undefined;
  /** The voter's DPDP consent as they said it at the door (source `visit`). */
  consent?: 'given' | 'withdrawn' | undefined;
}

export interface ItemError {
  error_code: string;
  message: string;
  details?: FieldErrors;
}

export interface VisitOutcome {
  client_id: string;
  id: string | null;
  status: 'created' | 'duplicate' | 'rejected';
  not_applied?: string[];
  error?: ItemError;
}

/** A visit checked and ready to store. */
export interface Ready {
  body: VisitBody;
  at: string;
  tags: Tag[];
  fields: Map<string, StoredValue | null>;
  survey: VisitAnswers | undefined;
}

type Stored = Pick<VisitRow, 'id' | 'client_id' | 'not_applied'>;

/** Rows stored before under these client ids (a visit's, a mark's), by client id; read 500 at a time. */
export async function byClientId<R extends { client_id: string }>(
  clientIds: string[],
  read: (chunk: string[]) => Promise<R[]>,
): Promise<Map<string, R>> {
  const out = new Map<string, R>();
  const unique = [...new Set(clientIds)];
  for (let i = 0; i < unique.length; i += 500)
    for (const r of await read(unique.slice(i, i + 500))) out.set(r.client_id, r);
  return out;
}

/** The visits stored before under these client ids. */
export function storedVisits(db: Executor, workspaceId: number, clientIds: string[]) {
  return byClientId(clientIds, (chunk) =>
    db
      .selectFrom('visits')
      .select(['id', 'client_id', 'not_applied'])
      .where('workspace_id', '=', workspaceId)
      .where('client_id', 'in', chunk)
      .execute(),
  );
}

export function duplicate(row: Stored): VisitOutcome {
  const notApplied = JSON.parse(row.not_applied) as string[];
  return {
    client_id: row.client_id,
    id: visitRef(row.id),
    status: 'duplicate',
    ...(notApplied.length > 0 ? { not_applied: notApplied } : {}),
  };
}

/** The fields a visit would change (`support_level`, `fields.<key>`), its survey's saves included. */
function wantedFields(item: Ready): string[] {
  const wanted: string[] = [];
  if (item.body.support_level !== undefined) wanted.push('support_level');
  for (const key of item.fields.keys()) wanted.push(`fields.${key}`);
  for (const target of item.survey?.targets.values() ?? [])
    if (target === 'support_level') wanted.push(target);
    else if (target.startsWith('field:')) wanted.push(`fields.${target.slice(6)}`);
  return [...new Set(wanted)];
}

/** Inserts the visits (a client_id another request stored meanwhile is skipped); their ids by client_id. */
async function insertVisits(trx: Executor, auth: AuthContext, items: Ready[]): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  const now = nowIso();
  for (let i = 0; i < items.length; i += 250) {
    const rows = await trx
      .insertInto('visits')
      .values(
        items.slice(i, i + 250).map(({ body, at, tags, survey }) => ({
          workspace_id: auth.workspaceId,
          client_id: body.client_id,
          voter_id: body.voter_id,
          user_id: auth.userId,
          outcome: body.outcome,
          support_level: body.support_level ?? null,
          tags_add: tags.length > 0 ? JSON.stringify(tags.map((t) => t.label)) : null,
          fields: body.fields && Object.keys(body.fields).length > 0 ? JSON.stringify(body.fields) : null,
          note: body.note ?? null,
          survey_id: survey?.survey.id ?? null,
          response_id: null,
          visited_at: at,
          lat: body.location?.lat ?? null,
          lon: body.location?.lon ?? null,
          created_at: now,
        })),
      )
      .onConflict((oc) => oc.doNothing())
      .returning(['id', 'client_id'])
      .execute();
    for (const r of rows) ids.set(r.client_id, Number(r.id));
  }
  return ids;
}

/** When each (voter, field) last changed on the service, as `voter|field` -> ISO time. */
async function stampsOf(trx: Executor, items: Ready[]): Promise<Map<string, string>> {
  const voters = [...new Set(items.filter((i) => wantedFields(i).length > 0).map((i) => i.body.voter_id))];
  const out = new Map<string, string>();
  for (let i = 0; i < voters.length; i += 500) {
    const rows = await trx
      .selectFrom('voter_stamps')
      .select(['voter_id', 'field', 'at'])
      .where('voter_id', 'in', voters.slice(i, i + 500))
      .execute();
    for (const r of rows) out.set(`${r.voter_id}|${r.field}`, new Date(r.at).toISOString());
  }
  return out;
}

/** What the batch writes into the voters, each field from the newest visit that may write it. */
interface Plan {
  support: Map<number, number>;
  fields: Map<number, Map<string, StoredValue | null>>;
  tags: Map<number, Tag[]>;
  /** `voter|field` -> the visit time it is stamped with. */
  stamps: Map<string, string>;
  notApplied: Map<string, string[]>;
}

/**
 * Decides, visit by visit in the batch's order, which fields each applies: one whose stamp is later than the visit
 * keeps its value; one it applies is stamped with the visit's time (so an older visit later in the batch, or synced
 * later, does not undo it).
 */
function plan(items: Ready[], known: Map<string, string>): Plan {
  const p: Plan = {
    support: new Map(),
    fields: new Map(),
    tags: new Map(),
    stamps: new Map(),
    notApplied: new Map(),
  };
  for (const item of items) {
    const voter = item.body.voter_id;
    const newer = new Set<string>();
    for (const field of wantedFields(item)) {
      const key = `${voter}|${field}`;
      const stamp = p.stamps.get(key) ?? known.get(key);
      if (stamp !== undefined && stamp > item.at) newer.add(field);
      else p.stamps.set(key, item.at);
    }
    if (item.body.support_level !== undefined && !newer.has('support_level'))
      p.support.set(voter, item.body.support_level);
    for (const [key, value] of item.fields)
      if (!newer.has(`fields.${key}`))
        p.fields.set(voter, (p.fields.get(voter) ?? new Map()).set(key, value));
    if (item.tags.length > 0) p.tags.set(voter, [...(p.tags.get(voter) ?? []), ...item.tags]);
    p.notApplied.set(item.body.client_id, [...newer]);
  }
  return p;
}

/** Writes the plan: support levels, field values, tags, the touch of each changed voter, the stamps. */
async function write(trx: Executor, workspaceId: number, p: Plan): Promise<Set<number>> {
  const byLevel = new Map<number, number[]>();
  for (const [voter, level] of p.support) byLevel.set(level, [...(byLevel.get(level) ?? []), voter]);
  const now = nowIso();
  for (const [level, voters] of byLevel)
    await trx
      .updateTable('voters')
      .set({ support_level: level })
      .where('workspace_id', '=', workspaceId)
      .where('id', 'in', voters)
      .execute();
  for (const [voter, values] of p.fields) await setFieldValues(trx, workspaceId, voter, values);
  const tagRows = new Map<string, { workspace_id: number; tag_key: string; voter_id: number }>();
  for (const [voter, tags] of p.tags)
    for (const tag of tags)
      tagRows.set(`${voter}|${tag.key}`, { workspace_id: workspaceId, tag_key: tag.key, voter_id: voter });
  if (tagRows.size > 0) {
    await nameTags(trx, workspaceId, [
      ...new Map([...p.tags.values()].flat().map((t) => [t.key, t])).values(),
    ]);
    const rows = [...tagRows.values()];
    for (let i = 0; i < rows.length; i += 500)
      await trx
        .insertInto('voter_tags')
        .values(rows.slice(i, i + 500))
        .onConflict((oc) => oc.doNothing())
        .execute();
  }
  const changed = new Set([...p.support.keys(), ...p.fields.keys(), ...p.tags.keys()]);
  const list = [...changed];
  for (let i = 0; i < list.length; i += 500)
    await trx
      .updateTable('voters')
      .set({ updated_at: now })
      .where('workspace_id', '=', workspaceId)
      .where('id', 'in', list.slice(i, i + 500))
      .execute();
  await setStamps(trx, p.stamps);
  return changed;
}

/** Upserts stamps (`voter|field` -> time): after the writes, whose triggers stamped them with the present. */
export async function setStamps(trx: Executor, stamps: Map<string, string>): Promise<void> {
  const rows = [...stamps].map(([key, at]) => {
    const bar = key.indexOf('|');
    return { voter_id: Number(key.slice(0, bar)), field: key.slice(bar + 1), at };
  });
  for (let i = 0; i < rows.length; i += 500)
    await trx
      .insertInto('voter_stamps')
      .values(rows.slice(i, i + 500))
      .onConflict((oc) =>
        oc.columns(['voter_id', 'field']).doUpdateSet((eb) => ({ at: eb.ref('excluded.at') })),
      )
      .execute();
}

/**
 * Stores checked visits (each client_id once in `items`) and applies them to their voters. Returns each one's
 * outcome, in the order given.
 */
export async function storeVisits(
  trx: Executor,
  auth: AuthContext,
  items: Ready[],
  language: string,
): Promise<VisitOutcome[]> {
  const ws = auth.workspaceId;
  const ids = await insertVisits(trx, auth, items);
  // A client_id another request stored meanwhile: that one stands.
  const raced = await storedVisits(
    trx,
    ws,
    items.filter((i) => !ids.has(i.body.client_id)).map((i) => i.body.client_id),
  );
  const mine = items.filter((i) => ids.has(i.body.client_id));
  const p = plan(mine, await stampsOf(trx, mine));
  const changed = await write(trx, ws, p);
  for (const item of mine.filter((i) => i.survey)) await answerSurvey(trx, ws, item, ids, p, language);
  const entries: AuditEntry[] = mine
    .filter((i) => changed.has(i.body.voter_id))
    .map((item) => ({
      workspaceId: ws,
      actor: { userId: auth.userId, ip: null },
      action: 'voter.updated',
      target: { type: 'voter', id: item.body.voter_id },
      details: {
        actor: 'visit',
        client_id: item.body.client_id,
        fields: wantedFields(item).filter((f) => !p.notApplied.get(item.body.client_id)!.includes(f)),
        ...(item.tags.length > 0 ? { tags_add: item.tags.map((t) => t.label) } : {}),
      },
    }));
  await recordAudits(trx, entries);
  for (const item of mine) {
    const notApplied = p.notApplied.get(item.body.client_id)!;
    if (notApplied.length > 0)
      await trx
        .updateTable('visits')
        .set({ not_applied: JSON.stringify(notApplied) })
        .where('id', '=', ids.get(item.body.client_id)!)
        .execute();
  }
  return items.map((item) => {
    const id = ids.get(item.body.client_id);
    if (id === undefined) return duplicate(raced.get(item.body.client_id)!);
    const notApplied = p.notApplied.get(item.body.client_id)!;
    return {
      client_id: item.body.client_id,
      id: visitRef(id),
      status: 'created' as const,
      ...(notApplied.length > 0 ? { not_applied: notApplied } : {}),
    };
  });
}

/** A visit's survey answers as a `visit` response, saved to the voter but where a newer value stands. */
async function answerSurvey(
  trx: Executor,
  workspaceId: number,
  item: Ready,
  ids: Map<string, number>,
  p: Plan,
  language: string,
) {
  const survey = item.survey!;
  const voter = await trx
    .selectFrom('voters')
    .select(['phone', 'language'])
    .where('id', '=', item.body.voter_id)
    .executeTakeFirstOrThrow();
  const notApplied = p.notApplied.get(item.body.client_id)!;
  const keep = new Set(notApplied.map((f) => (f.startsWith('fields.') ? `field:${f.slice(7)}` : f)));
  const responseId = await storeVisitResponse(
    trx,
    survey,
    { id: item.body.voter_id, workspaceId, phone: voter.phone, language: voter.language ?? language },
    item.at,
    keep,
  );
  // Its saves were stamped with the present by the triggers: the visit's own time again.
  const saved = new Map<string, string>();
  for (const [, target] of survey.targets)
    if (target === 'support_level' || target.startsWith('field:')) {
      const field = target === 'support_level' ? target : `fields.${target.slice(6)}`;
      if (!notApplied.includes(field)) saved.set(`${item.body.voter_id}|${field}`, item.at);
    }
  await setStamps(trx, saved);
  await trx
    .updateTable('visits')
    .set({ response_id: responseId })
    .where('id', '=', ids.get(item.body.client_id)!)
    .execute();
}
