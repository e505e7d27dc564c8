import type { Kysely } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import type { Database, VisitRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { pageResult } from '../../domain.ts';
import { AppError, type FieldErrors } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { responseRef, surveyRef, visitRef } from '../../refs.ts';
import { recordAudit } from '../audit/audit.repository.ts';
import { checkVisitAnswers, storeVisitResponse, type VisitAnswers } from '../surveys/survey-visits.ts';
import { fieldDefs, sensitiveKeys, type StoredValue, type VoterFieldDef } from '../voters/voter-fields.ts';
import { addTag, nameTags, setFieldValues } from '../voters/voter-record.repository.ts';
import { checkTags, type Tag } from '../voters/voter-record.rules.ts';
import { checkFieldValues } from '../voters/voter-fields.ts';
import { updateVoter } from '../voters/voters.repository.ts';
import { filteredVoters, withPlaces } from '../voters/voters.search.ts';
import { seesSensitive } from '../voters/voters.rules.ts';
import type { Outcome } from './field.schemas.ts';
import { reachableVoters, turfCounts, turfFilters, turfsOf, type TurfsService } from './turfs.ts';
import { defaultLanguage } from '../workspaces/workspaces.repository.ts';

/**
 * Visits (the contract's fourth part, "Field work"): batches from canvassers' devices, each applied once by its
 * `client_id`. A visit's changes to the voter apply field by field: a field that changed on the service after the
 * visit's `visited_at` (voter_stamps, kept by triggers) keeps its newer value, and the visit says which it did not
 * apply. A visit's survey answers are a response with channel `visit`.
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
interface Ready {
  body: VisitBody;
  at: string;
  tags: Tag[];
  fields: Map<string, StoredValue | null>;
  survey: VisitAnswers | undefined;
}

/** How far ahead of the service's clock a device's time may be. */
const CLOCK_SKEW_MS = 10 * 60_000;

export const rejected = (client_id: string, error: ItemError) => ({
  client_id,
  id: null,
  status: 'rejected' as const,
  error,
});

export const invalid = (details: FieldErrors): ItemError => ({
  error_code: 'validation_error',
  message: `Check ${Object.keys(details).join(', ')}.`,
  details,
});

/** A voter the caller cannot reach: the same words whether it is outside their turfs or does not exist. */
export const unreachable = (volunteer: boolean): ItemError => ({
  error_code: 'not_found',
  message: volunteer ? 'No voter of your turfs has this id.' : 'No voter of this workspace has this id.',
});

/** A device's time as stored: ISO 8601 UTC; an error when it is ahead of the service's clock. */
export function deviceTime(value: string, field: string): string | FieldErrors {
  const ms = Date.parse(value);
  if (!Number.isFinite(ms)) return { [field]: ['must be a date-time with its zone.'] };
  if (ms > Date.now() + CLOCK_SKEW_MS) return { [field]: ['is in the future: check the device clock.'] };
  return new Date(ms).toISOString();
}

export class VisitsService {
  constructor(private readonly deps: { db: Kysely<Database>; turfs: TurfsService }) {}

  /** Records a batch: each visit created, a duplicate of one stored before, or rejected with its reason. */
  async record(auth: AuthContext, visits: VisitBody[]): Promise<VisitOutcome[]> {
    const { db } = this.deps;
    const ws = auth.workspaceId;
    const volunteer = auth.role === 'volunteer';
    const turfs = await turfsOf(db, auth);
    const stored = await storedVisits(
      db,
      ws,
      visits.map((v) => v.client_id),
    );
    const reachable = await reachableVoters(
      db,
      ws,
      turfs,
      visits.filter((v) => !stored.has(v.client_id)).map((v) => v.voter_id),
    );
    const defs = await fieldDefs(db, ws);
    const out: VisitOutcome[] = [];
    const ready: Array<{ index: number; item: Ready }> = [];
    for (const body of visits) {
      const before = stored.get(body.client_id);
      if (before) {
        out.push(duplicate(before));
        continue;
      }
      if (!reachable.has(body.voter_id)) {
        out.push(rejected(body.client_id, unreachable(volunteer)));
        continue;
      }
      const checked = await this.check(auth, body, defs);
      if ('error_code' in checked) out.push(rejected(body.client_id, checked));
      else {
        ready.push({ index: out.length, item: checked });
        out.push(rejected(body.client_id, { error_code: 'internal_error', message: 'Not stored.' }));
      }
    }
    if (ready.length === 0) return out;
    await db.transaction().execute(async (trx) => {
      const language = await defaultLanguage(trx, ws);
      const seen = new Map<string, VisitOutcome>();
      for (const { index, item } of ready) {
        const again = seen.get(item.body.client_id);
        out[index] = again ? { ...again, status: 'duplicate' } : await this.store(trx, auth, item, language);
        seen.set(item.body.client_id, out[index]!);
      }
    });
    return out;
  }

  /** A visit's values checked: tags, custom fields, survey answers; nothing sensitive from a volunteer. */
  private async check(
    auth: AuthContext,
    body: VisitBody,
    defs: readonly VoterFieldDef[],
  ): Promise<Ready | ItemError> {
    const errors: FieldErrors = {};
    const sensitive = seesSensitive(auth.role);
    const at = deviceTime(body.visited_at, 'visited_at');
    if (typeof at !== 'string') Object.assign(errors, at);
    if (body.support_level !== undefined && !sensitive)
      errors.support_level = ['is sensitive: politicians and managers record it.'];
    const tagged = body.tags_add ? checkTags(body.tags_add, 'tags_add') : { tags: [], errors: {} };
    Object.assign(errors, tagged.errors);
    const fields = checkFieldValues(defs, body.fields);
    Object.assign(errors, fields.errors);
    if (!sensitive)
      for (const key of sensitiveKeys(defs))
        if (fields.values.has(key))
          errors[`fields.${key}`] = ['is sensitive: politicians and managers record it.'];
    let survey: VisitAnswers | undefined;
    if (body.answers && !body.survey_id) errors.survey_id = ['is required with answers.'];
    if (body.survey_id) {
      const found = await checkVisitAnswers(
        this.deps.db,
        auth.workspaceId,
        body.survey_id,
        body.answers ?? {},
        sensitive,
      );
      if ('survey' in found) survey = found as VisitAnswers;
      else Object.assign(errors, found);
    }
    if (Object.keys(errors).length > 0) return invalid(errors);
    return { body, at: at as string, tags: tagged.tags ?? [], fields: fields.values, survey };
  }

  private async store(
    trx: Executor,
    auth: AuthContext,
    item: Ready,
    language: string,
  ): Promise<VisitOutcome> {
    const { body, at } = item;
    const ws = auth.workspaceId;
    const inserted = await trx
      .insertInto('visits')
      .values({
        workspace_id: ws,
        client_id: body.client_id,
        voter_id: body.voter_id,
        user_id: auth.userId,
        outcome: body.outcome,
        support_level: body.support_level ?? null,
        tags_add: item.tags.length > 0 ? JSON.stringify(item.tags.map((t) => t.label)) : null,
        fields: body.fields && Object.keys(body.fields).length > 0 ? JSON.stringify(body.fields) : null,
        note: body.note ?? null,
        survey_id: item.survey?.survey.id ?? null,
        response_id: null,
        visited_at: at,
        lat: body.location?.lat ?? null,
        lon: body.location?.lon ?? null,
        created_at: nowIso(),
      })
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
    // Another request stored this client_id meanwhile: that one stands.
    if (!inserted) return duplicate((await storedVisits(trx, ws, [body.client_id])).get(body.client_id)!);
    const notApplied = await applyVisit(trx, ws, auth.userId, item);
    let responseId: number | null = null;
    if (item.survey) {
      const voter = await trx
        .selectFrom('voters')
        .select(['phone', 'language'])
        .where('id', '=', body.voter_id)
        .executeTakeFirstOrThrow();
      const keep = new Set(notApplied.map((f) => (f.startsWith('fields.') ? `field:${f.slice(7)}` : f)));
      responseId = await storeVisitResponse(
        trx,
        item.survey,
        { id: body.voter_id, workspaceId: ws, phone: voter.phone, language: voter.language ?? language },
        at,
        keep,
      );
      // The survey's saves, stamped with the visit's time as the visit's own changes are.
      const saved = item.survey.values
        .filter((v) => v.value.choice_key !== 'other' && v.question.save_to)
        .map((v) => v.question.save_to!)
        .filter((t) => (t === 'support_level' || t.startsWith('field:')) && !keep.has(t))
        .map((t) => (t === 'support_level' ? t : `fields.${t.slice(6)}`));
      await stampFields(trx, body.voter_id, saved, at);
    }
    await trx
      .updateTable('visits')
      .set({ not_applied: JSON.stringify(notApplied), response_id: responseId })
      .where('id', '=', inserted.id)
      .execute();
    return {
      client_id: body.client_id,
      id: visitRef(inserted.id),
      status: 'created',
      ...(notApplied.length > 0 ? { not_applied: notApplied } : {}),
    };
  }

  /** A page of visits, newest first; a volunteer's own only. */
  async list(
    auth: AuthContext,
    query: {
      page: number;
      per_page: number;
      turf_id?: string;
      user_id?: number;
      voter_id?: number;
      since?: string;
    },
  ) {
    const { db } = this.deps;
    const ws = auth.workspaceId;
    if (auth.role === 'volunteer' && query.user_id !== undefined && query.user_id !== auth.userId)
      throw new AppError(
        'forbidden',
        'A volunteer lists only their own visits: leave out user_id, or give yours.',
      );
    const userId = auth.role === 'volunteer' ? auth.userId : query.user_id;
    const turf = query.turf_id !== undefined ? await this.deps.turfs.turf(auth, query.turf_id) : undefined;
    const turfVoters = turf ? await withPlaces(db, ws, turfFilters(turf)) : undefined;
    const since = query.since ? new Date(Date.parse(query.since)).toISOString() : undefined;
    const base = () =>
      db
        .selectFrom('visits')
        .where('visits.workspace_id', '=', ws)
        .$if(userId !== undefined, (q) => q.where('visits.user_id', '=', userId!))
        .$if(query.voter_id !== undefined, (q) => q.where('visits.voter_id', '=', query.voter_id!))
        .$if(since !== undefined, (q) => q.where('visits.visited_at', '>=', since!))
        .$if(turfVoters !== undefined, (q) =>
          q.where('visits.voter_id', 'in', filteredVoters(db, ws, turfVoters!).select('voters.id')),
        );
    const total = await base()
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const rows = await base()
      .selectAll('visits')
      .orderBy('visits.id', 'desc')
      .limit(query.per_page)
      .offset((query.page - 1) * query.per_page)
      .execute();
    const hidden = seesSensitive(auth.role) ? undefined : sensitiveKeys(await fieldDefs(db, ws));
    return pageResult(
      rows.map((r) => visitView(r, hidden)),
      Number(total.n),
      query.page,
      query.per_page,
    );
  }

  /** A turf's progress: its voters and households, who was visited and met, by outcome, support and canvasser. */
  async progress(auth: AuthContext, ref: string) {
    const { db } = this.deps;
    const ws = auth.workspaceId;
    const turf = await this.deps.turfs.turf(auth, ref);
    const filters = await withPlaces(db, ws, turfFilters(turf));
    const counts = await turfCounts(db, ws, filters);
    const visits = await db
      .selectFrom('visits')
      .select(['voter_id', 'outcome', 'user_id', 'visited_at', 'id'])
      .where('workspace_id', '=', ws)
      .where('voter_id', 'in', filteredVoters(db, ws, filters).select('voters.id'))
      .orderBy('visited_at')
      .orderBy('id')
      .execute();
    const latest = new Map<number, string>();
    const met = new Set<number>();
    const byUser = new Map<number | null, number>();
    for (const v of visits) {
      latest.set(Number(v.voter_id), v.outcome);
      if (v.outcome === 'met') met.add(Number(v.voter_id));
      const user = v.user_id === null ? null : Number(v.user_id);
      byUser.set(user, (byUser.get(user) ?? 0) + 1);
    }
    const byOutcome = { met: 0, not_home: 0, refused: 0, moved: 0, deceased: 0, wrong_address: 0 };
    for (const outcome of latest.values()) byOutcome[outcome as Outcome] += 1;
    let bySupport: Record<'1' | '2' | '3' | '4' | '5' | 'unknown', number> | undefined;
    if (seesSensitive(auth.role)) {
      const rows = await filteredVoters(db, ws, filters)
        .select(['voters.support_level', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy('voters.support_level')
        .execute();
      bySupport = { '1': 0, '2': 0, '3': 0, '4': 0, '5': 0, unknown: 0 };
      for (const r of rows)
        bySupport[r.support_level === null ? 'unknown' : (String(r.support_level) as '1')] = Number(r.n);
    }
    return {
      ...counts,
      visited: latest.size,
      met: met.size,
      by_outcome: byOutcome,
      ...(bySupport ? { by_support: bySupport } : {}),
      by_user: [...byUser]
        .map(([user_id, n]) => ({ user_id, visits: n }))
        .sort((a, b) => b.visits - a.visits),
    };
  }
}

/** The visits stored before under these client ids. */
async function storedVisits(db: Executor, workspaceId: number, clientIds: string[]) {
  const out = new Map<string, Pick<VisitRow, 'id' | 'client_id' | 'not_applied'>>();
  const unique = [...new Set(clientIds)];
  for (let i = 0; i < unique.length; i += 500) {
    const rows = await db
      .selectFrom('visits')
      .select(['id', 'client_id', 'not_applied'])
      .where('workspace_id', '=', workspaceId)
      .where('client_id', 'in', unique.slice(i, i + 500))
      .execute();
    for (const r of rows) out.set(r.client_id, r);
  }
  return out;
}

function duplicate(row: Pick<VisitRow, 'id' | 'client_id' | 'not_applied'>): VisitOutcome {
  const notApplied = JSON.parse(row.not_applied) as string[];
  return {
    client_id: row.client_id,
    id: visitRef(row.id),
    status: 'duplicate',
    ...(notApplied.length > 0 ? { not_applied: notApplied } : {}),
  };
}

/**
 * Writes the visit's changes into the voter, field by field: a field whose stamp is later than the visit keeps
 * its value. Applied fields are stamped with the visit's time, so that an older visit synced later does not
 * overwrite them. Returns the fields not applied.
 */
async function applyVisit(
  trx: Executor,
  workspaceId: number,
  userId: number,
  item: Ready,
): Promise<string[]> {
  const { body, at } = item;
  const voterId = body.voter_id;
  const wanted: string[] = [];
  if (body.support_level !== undefined) wanted.push('support_level');
  for (const key of item.fields.keys()) wanted.push(`fields.${key}`);
  for (const target of item.survey?.targets.values() ?? [])
    if (target === 'support_level' || target.startsWith('field:'))
      wanted.push(target === 'support_level' ? target : `fields.${target.slice(6)}`);
  const newer =
    wanted.length === 0
      ? new Set<string>()
      : new Set(
          (
            await trx
              .selectFrom('voter_stamps')
              .select('field')
              .where('voter_id', '=', voterId)
              .where('field', 'in', wanted)
              .where('at', '>', at)
              .execute()
          ).map((r) => r.field),
        );
  const now = nowIso();
  const applied: string[] = [];
  if (body.support_level !== undefined && !newer.has('support_level')) {
    await updateVoter(trx, workspaceId, voterId, { support_level: body.support_level, updated_at: now });
    applied.push('support_level');
  }
  const fields = new Map([...item.fields].filter(([key]) => !newer.has(`fields.${key}`)));
  if (fields.size > 0) {
    await setFieldValues(trx, workspaceId, voterId, fields);
    applied.push(...[...fields.keys()].map((k) => `fields.${k}`));
  }
  if (item.tags.length > 0) {
    await nameTags(trx, workspaceId, item.tags);
    for (const tag of item.tags) await addTag(trx, workspaceId, voterId, tag.key);
  }
  if (applied.length > 0 || item.tags.length > 0) {
    if (!applied.includes('support_level')) await updateVoter(trx, workspaceId, voterId, { updated_at: now });
    await recordAudit(trx, {
      workspaceId,
      actor: { userId, ip: null },
      action: 'voter.updated',
      target: { type: 'voter', id: voterId },
      details: {
        actor: 'visit',
        client_id: body.client_id,
        fields: applied,
        ...(item.tags.length > 0 ? { tags_add: item.tags.map((t) => t.label) } : {}),
      },
    });
  }
  await stampFields(trx, voterId, applied, at);
  return wanted.filter((f) => newer.has(f)).filter((f, i, all) => all.indexOf(f) === i);
}

/** Sets the stamps of fields a visit wrote to the visit's own time (the triggers stamped them now). */
async function stampFields(trx: Executor, voterId: number, fields: string[], at: string) {
  if (fields.length === 0) return;
  await trx
    .insertInto('voter_stamps')
    .values(fields.map((field) => ({ voter_id: voterId, field, at })))
    .onConflict((oc) => oc.columns(['voter_id', 'field']).doUpdateSet({ at }))
    .execute();
}

function visitView(r: VisitRow, hidden: ReadonlySet<string> | undefined) {
  const fields = r.fields ? (JSON.parse(r.fields) as Record<string, unknown>) : {};
  if (hidden) for (const key of hidden) delete fields[key];
  return {
    id: visitRef(r.id),
    client_id: r.client_id,
    voter_id: Number(r.voter_id),
    user_id: r.user_id === null ? null : Number(r.user_id),
    outcome: r.outcome as Outcome,
    ...(hidden ? {} : { support_level: r.support_level }),
    tags_add: r.tags_add ? (JSON.parse(r.tags_add) as string[]) : [],
    fields,
    note: r.note,
    survey_id: r.survey_id === null ? null : surveyRef(r.survey_id),
    response_id: r.response_id === null ? null : responseRef(r.response_id),
    visited_at: r.visited_at,
    location: r.lat !== null && r.lon !== null ? { lat: r.lat, lon: r.lon } : null,
    not_applied: JSON.parse(r.not_applied) as string[],
    created_at: r.created_at,
  };
}
