import { recordConsent } from '../voters/voter-consent.ts';
import type { Kysely } from 'kysely';
import type { Database, VisitRow } from '../../db/schema.ts';
import { pageResult } from '../../domain.ts';
import { AppError, type FieldErrors } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { responseRef, surveyRef, visitRef } from '../../refs.ts';
import { checkVisitAnswers, type VisitAnswers } from '../surveys/survey-visits.ts';
import { checkFieldValues, fieldDefs, sensitiveKeys, type VoterFieldDef } from '../voters/voter-fields.ts';
import { checkTags } from '../voters/voter-record.rules.ts';
import { filteredVoters, withPlaces } from '../voters/voters.search.ts';
import { seesSensitive } from '../voters/voters.rules.ts';
import type { Outcome } from './field.schemas.ts';
import {
  duplicate,
  type ItemError,
  type Ready,
  storedVisits,
  storeVisits,
  type VisitBody,
  type VisitOutcome,
} from './visit-batch.ts';
import { reachableVoters, turfCounts, turfFilters, turfsOf, type TurfsService } from './turfs.ts';
import { defaultLanguage } from '../workspaces/workspaces.repository.ts';

/**
 * Visits (the contract's fourth part, "Field work"): batches from canvassers' devices, each applied once by its
 * `client_id`. A visit's changes to the voter apply field by field: a field that changed on the service after the
 * visit's `visited_at` (voter_stamps, kept by triggers) keeps its newer value, and the visit says which it did not
 * apply. A visit's survey answers are a response with channel `visit`.
 */

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
    const surveys = new Map<string, Promise<unknown>>();
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
      const checked = await this.check(auth, body, defs, surveys);
      if ('error_code' in checked) out.push(rejected(body.client_id, checked));
      else {
        ready.push({ index: out.length, item: checked });
        out.push(rejected(body.client_id, { error_code: 'internal_error', message: 'Not stored.' }));
      }
    }
    if (ready.length === 0) return out;
    // A client_id twice in one batch: the first is stored, the second is its duplicate.
    const firsts = new Map<string, Ready>();
    for (const { item } of ready) if (!firsts.has(item.body.client_id)) firsts.set(item.body.client_id, item);
    const outcomes = await db.transaction().execute(async (trx) => {
      const stored = await storeVisits(trx, auth, [...firsts.values()], await defaultLanguage(trx, ws));
      const created = new Set(stored.filter((o) => o.status === 'created').map((o) => o.client_id));
      // Consent said at the door, at the visit's time: an older visit synced late never undoes a newer record.
      for (const { body } of firsts.values())
        if (body.consent && created.has(body.client_id))
          await recordConsent(trx, ws, { voterIds: [body.voter_id] }, body.consent, 'visit', {
            at: new Date(Date.parse(body.visited_at)).toISOString(),
            unlessNewer: true,
          });
      return stored;
    });
    const byClient = new Map(outcomes.map((o) => [o.client_id, o]));
    const seen = new Set<string>();
    for (const { index, item } of ready) {
      const outcome = byClient.get(item.body.client_id)!;
      out[index] = seen.has(item.body.client_id) ? { ...outcome, status: 'duplicate' } : outcome;
      seen.add(item.body.client_id);
    }
    return out;
  }

  /** A visit's values checked: tags, custom fields, survey answers; nothing sensitive from a volunteer. */
  private async check(
    auth: AuthContext,
    body: VisitBody,
    defs: readonly VoterFieldDef[],
    surveys: Map<string, Promise<unknown>>,
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
        surveys,
      );
      if ('survey' in found) survey = found as VisitAnswers;
      else Object.assign(errors, found);
    }
    if (Object.keys(errors).length > 0) return invalid(errors);
    return { body, at: at as string, tags: tagged.tags ?? [], fields: fields.values, survey };
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
