import { type Kysely, sql } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, PollMarkRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { pageResult } from '../../domain.ts';
import type { FieldErrors } from '../../errors.ts';
import type { AuthContext } from '../../http/guard.ts';
import { markRef } from '../../refs.ts';
import { recordLive } from '../events/live.ts';
import { checkVoterFilters, filteredVoters, type VoterFilters, withPlaces } from '../voters/voters.search.ts';
import { reachableVoters, turfsOf } from './turfs.ts';
import { byClientId, type ItemError } from './visit-batch.ts';
import { deviceTime, invalid, rejected, unreachable } from './visits.ts';

/**
 * Poll day (the contract's fourth part, "Field work"): booth agents' marks of who has voted, idempotent by
 * `client_id`; each voter's state is the mark with the latest `marked_at` (`poll_voted`). Turnout by booth or part
 * and the supporters not yet marked are read from that state; each new mark is a `poll_day.marked` event on the
 * live stream, which carries no name, phone or support level.
 */

export interface MarkBody {
  client_id: string;
  voter_id?: number | undefined;
  part_number?: number | undefined;
  serial_number?: number | undefined;
  voted: boolean;
  marked_at: string;
}

export interface MarkOutcome {
  client_id: string;
  id: string | null;
  status: 'created' | 'duplicate' | 'rejected';
  voter_id?: number;
  error?: ItemError;
}

/** Supporters: support level 1 or 2. */
const SUPPORTERS = [1, 2];

export class PollDayService {
  constructor(private readonly deps: { db: Kysely<Database> }) {}

  async mark(auth: AuthContext, marks: MarkBody[]): Promise<MarkOutcome[]> {
    const { db } = this.deps;
    const ws = auth.workspaceId;
    const stored = await storedMarks(
      db,
      ws,
      marks.map((m) => m.client_id),
    );
    const bySlip = await votersBySlip(db, ws, marks);
    const voterOf = (m: MarkBody) =>
      m.voter_id ?? bySlip.get(`${m.part_number}:${m.serial_number}`) ?? undefined;
    const turfs = await turfsOf(db, auth);
    const reachable = await reachableVoters(
      db,
      ws,
      turfs,
      marks.map(voterOf).filter((id): id is number => id !== undefined),
    );
    const out: MarkOutcome[] = [];
    const ready: Array<{ index: number; mark: MarkBody; voterId: number; at: string }> = [];
    for (const mark of marks) {
      const before = stored.get(mark.client_id);
      if (before) {
        out.push(duplicate(before));
        continue;
      }
      const errors: FieldErrors = {};
      if (mark.voter_id === undefined && (mark.part_number === undefined || mark.serial_number === undefined))
        errors.voter_id = ['or part_number with serial_number is required.'];
      if (mark.voter_id !== undefined && (mark.part_number !== undefined || mark.serial_number !== undefined))
        errors.voter_id = ['names the voter: leave out part_number and serial_number, or send them instead.'];
      const at = deviceTime(mark.marked_at, 'marked_at');
      if (typeof at !== 'string') Object.assign(errors, at);
      if (Object.keys(errors).length > 0) {
        out.push(rejected(mark.client_id, invalid(errors)));
        continue;
      }
      const voterId = voterOf(mark);
      if (voterId === undefined || !reachable.has(voterId)) {
        out.push(rejected(mark.client_id, unreachable(auth.role === 'volunteer')));
        continue;
      }
      ready.push({ index: out.length, mark, voterId, at: at as string });
      out.push(rejected(mark.client_id, { error_code: 'internal_error', message: 'Not stored.' }));
    }
    if (ready.length === 0) return out;
    await db.transaction().execute(async (trx) => {
      const seen = new Map<string, MarkOutcome>();
      for (const { index, mark, voterId, at } of ready) {
        const again = seen.get(mark.client_id);
        out[index] = again ? { ...again, status: 'duplicate' } : await store(trx, auth, mark, voterId, at);
        seen.set(mark.client_id, out[index]!);
      }
    });
    return out;
  }

  /**
   * Voters, voted, supporters and supporters voted, by booth or by part, of the voters the filters match. Without
   * filters (the booth board's question) each count is read from an index of its own: the voters and supporters
   * by group from voters, the voted from poll_voted (which keeps each marked voter's booth, part and support).
   */
  async turnout(workspaceId: number, groupBy: 'booth' | 'part_number', raw: Record<string, unknown>) {
    const { db } = this.deps;
    const filters = await withPlaces(db, workspaceId, await checkVoterFilters(db, workspaceId, raw));
    const rows =
      Object.keys(raw).length === 0
        ? await turnoutOfAll(db, workspaceId, groupBy)
        : await turnoutFiltered(db, workspaceId, groupBy, filters);
    return { data: rows };
  }

  /** The supporters of a booth or part not yet marked as voted, in roll order, with their phones. */
  async toCall(
    workspaceId: number,
    where: { booth?: string | undefined; part_number?: number | undefined },
    page: number,
    perPage: number,
  ) {
    const { db } = this.deps;
    const filters = await withPlaces(db, workspaceId, {
      ...(where.booth ? { booth: where.booth } : {}),
      ...(where.part_number !== undefined ? { part_number: where.part_number } : {}),
      support_level: SUPPORTERS,
    });
    const notVoted = () =>
      filteredVoters(db, workspaceId, filters).where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('poll_voted as pv')
              .select('pv.voter_id')
              .whereRef('pv.voter_id', '=', 'voters.id')
              .where('pv.voted', '=', 1),
          ),
        ),
      );
    const total = await notVoted()
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    const rows = await notVoted()
      .select([
        'voters.id',
        'voters.name',
        'voters.name_local',
        'voters.phone',
        'voters.booth',
        'voters.part_number',
        'voters.serial_number',
        'voters.house_number',
        'voters.support_level',
      ])
      .orderBy(sql`voters.part_number IS NULL`)
      .orderBy('voters.part_number')
      .orderBy('voters.serial_number')
      .orderBy('voters.id')
      .limit(perPage)
      .offset((page - 1) * perPage)
      .execute();
    return pageResult(
      rows.map((r) => ({ ...r, id: Number(r.id), support_level: Number(r.support_level) })),
      Number(total.n),
      page,
      perPage,
    );
  }
}

/** Each (part, serial) a mark names, resolved to its voter's id. */
async function votersBySlip(db: Executor, workspaceId: number, marks: MarkBody[]) {
  const out = new Map<string, number>();
  const slips = marks.filter((m) => m.voter_id === undefined && m.part_number && m.serial_number);
  for (let i = 0; i < slips.length; i += 200) {
    const chunk = slips.slice(i, i + 200);
    const rows = await db
      .selectFrom('voters')
      .select(['id', 'part_number', 'serial_number'])
      .where('workspace_id', '=', workspaceId)
      .where((eb) =>
        eb.or(
          chunk.map((m) =>
            eb.and([eb('part_number', '=', m.part_number!), eb('serial_number', '=', m.serial_number!)]),
          ),
        ),
      )
      .execute();
    for (const r of rows) out.set(`${r.part_number}:${r.serial_number}`, Number(r.id));
  }
  return out;
}

function storedMarks(db: Executor, workspaceId: number, clientIds: string[]) {
  return byClientId(clientIds, (chunk) =>
    db
      .selectFrom('poll_marks')
      .select(['id', 'client_id', 'voter_id'])
      .where('workspace_id', '=', workspaceId)
      .where('client_id', 'in', chunk)
      .execute(),
  );
}

function duplicate(row: Pick<PollMarkRow, 'id' | 'client_id' | 'voter_id'>): MarkOutcome {
  return {
    client_id: row.client_id,
    id: markRef(row.id),
    status: 'duplicate',
    voter_id: Number(row.voter_id),
  };
}

/** Stores a mark, moves the voter's state where it is the latest, and puts it on the live stream. */
async function store(trx: Executor, auth: AuthContext, mark: MarkBody, voterId: number, at: string) {
  const ws = auth.workspaceId;
  const now = nowIso();
  const row = await trx
    .insertInto('poll_marks')
    .values({
      workspace_id: ws,
      client_id: mark.client_id,
      voter_id: voterId,
      user_id: auth.userId,
      voted: mark.voted ? 1 : 0,
      marked_at: at,
      created_at: now,
    })
    .onConflict((oc) => oc.doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!row) return duplicate((await storedMarks(trx, ws, [mark.client_id])).get(mark.client_id)!);
  const voter = await trx
    .selectFrom('voters')
    .select(['booth', 'booth_key', 'part_number', 'serial_number', 'support_level'])
    .where('id', '=', voterId)
    .executeTakeFirstOrThrow();
  const state = {
    voted: row.voted,
    marked_at: at,
    booth_key: voter.booth_key,
    part_number: voter.part_number,
    supporter: voter.support_level === 1 || voter.support_level === 2 ? 1 : 0,
  };
  await trx
    .insertInto('poll_voted')
    .values({ voter_id: voterId, workspace_id: ws, ...state })
    .onConflict((oc) => oc.column('voter_id').doUpdateSet(state).where('poll_voted.marked_at', '<=', at))
    .execute();
  await recordLive(
    trx,
    ws,
    'poll_day.marked',
    {
      id: markRef(row.id),
      voter_id: voterId,
      booth: voter.booth,
      part_number: voter.part_number,
      serial_number: voter.serial_number,
      voted: mark.voted,
      marked_at: at,
      by: auth.userId,
    },
    auth.userId,
    now,
  );
  return { client_id: mark.client_id, id: markRef(row.id), status: 'created' as const, voter_id: voterId };
}

interface TurnoutRow {
  group: string | number | null;
  voters: number;
  voted: number;
  supporters: number;
  supporters_voted: number;
}

/** Turnout of the voters the filters match: the voters joined to their state, grouped. */
async function turnoutFiltered(
  db: Executor,
  workspaceId: number,
  groupBy: 'booth' | 'part_number',
  filters: VoterFilters,
): Promise<TurnoutRow[]> {
  const voted = sql<number>`CASE WHEN pv.voted = 1 THEN 1 ELSE 0 END`;
  const supporter = sql<number>`CASE WHEN voters.support_level IN (1, 2) THEN 1 ELSE 0 END`;
  const key = groupBy === 'booth' ? ('voters.booth_key' as const) : ('voters.part_number' as const);
  const rows = await filteredVoters(db, workspaceId, filters)
    .leftJoin('poll_voted as pv', 'pv.voter_id', 'voters.id')
    .select([
      key,
      (eb) => eb.fn.min(groupBy === 'booth' ? 'voters.booth' : 'voters.part_number').as('group'),
      (eb) => eb.fn.countAll<number>().as('voters'),
      sql<number>`sum(${voted})`.as('voted'),
      sql<number>`sum(${supporter})`.as('supporters'),
      sql<number>`sum(${supporter} * ${voted})`.as('supporters_voted'),
    ])
    .groupBy(key)
    .orderBy(key)
    .execute();
  return rows.map((r) => ({
    group: r.group === null ? null : groupBy === 'booth' ? String(r.group) : Number(r.group),
    voters: Number(r.voters),
    voted: Number(r.voted ?? 0),
    supporters: Number(r.supporters ?? 0),
    supporters_voted: Number(r.supporters_voted ?? 0),
  }));
}

/** Turnout of the whole roll, each count from its own index (no voter row is read but one per booth's name). */
async function turnoutOfAll(
  db: Executor,
  workspaceId: number,
  groupBy: 'booth' | 'part_number',
): Promise<TurnoutRow[]> {
  const column = groupBy === 'booth' ? 'booth_key' : 'part_number';
  const ref = sql.ref(column);
  const [all, supporters, voted] = isPostgres(db)
    ? await keptCounts(db, workspaceId, groupBy)
    : await Promise.all([
        sql<{ k: string | number | null; n: number }>`SELECT ${ref} AS k, count(*) AS n FROM voters
      WHERE workspace_id = ${workspaceId} GROUP BY ${ref}`.execute(db),
        sql<{ k: string | number | null; n: number }>`SELECT ${ref} AS k, count(*) AS n FROM voters
      WHERE workspace_id = ${workspaceId} AND support_level IN (1, 2) GROUP BY ${ref}`.execute(db),
        sql<{ k: string | number | null; n: number; s: number }>`SELECT ${ref} AS k, count(*) AS n,
      sum(supporter) AS s FROM poll_voted WHERE workspace_id = ${workspaceId} AND voted = 1 GROUP BY ${ref}`.execute(
          db,
        ),
      ]);
  const id = (k: string | number | null) => (k === null ? '' : String(k));
  const supportersOf = new Map(supporters.rows.map((r) => [id(r.k), Number(r.n)]));
  const votedOf = new Map(voted.rows.map((r) => [id(r.k), r]));
  const names =
    groupBy === 'booth'
      ? await boothNames(
          db,
          workspaceId,
          all.rows.filter((r) => r.k !== null).map((r) => String(r.k)),
        )
      : undefined;
  const rows = all.rows.map((r) => {
    const v = votedOf.get(id(r.k));
    return {
      group:
        r.k === null ? null : groupBy === 'booth' ? (names?.get(String(r.k)) ?? String(r.k)) : Number(r.k),
      key: r.k,
      voters: Number(r.n),
      voted: Number(v?.n ?? 0),
      supporters: supportersOf.get(id(r.k)) ?? 0,
      supporters_voted: Number(v?.s ?? 0),
    };
  });
  // In key order, the empty group last, on either database.
  rows.sort((a, b) =>
    a.key === null ? 1 : b.key === null ? -1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0,
  );
  return rows.map(({ key: _key, ...row }) => row);
}

type Counted = { rows: Array<{ k: string | number | null; n: number }> };
type CountedVoted = { rows: Array<{ k: string | number | null; n: number; s: number }> };

/**
 * PostgreSQL: the whole roll's voters, supporters and voted by booth or part, from the counts its triggers keep in
 * voter_value_counts (migration 045): a few rows per group instead of counting the roll (about a second at
 * 10,000,000 voters), exact in the request's snapshot. In the shape turnoutOfAll's three counts have.
 */
async function keptCounts(
  db: Executor,
  workspaceId: number,
  groupBy: 'booth' | 'part_number',
): Promise<[Counted, Counted, CountedVoted]> {
  const kind = groupBy === 'booth' ? 'booth' : 'part';
  const rows = await db
    .selectFrom('voter_value_counts')
    .select(['kind', 'key', 'value', (eb) => eb.fn.sum<number>('delta').as('n')])
    .where('workspace_id', '=', workspaceId)
    .where('kind', 'in', [kind, `voted_${kind}`])
    .groupBy(['kind', 'key', 'value'])
    .execute();
  const all = new Map<string, { n: number; s: number }>();
  const voted = new Map<string, { n: number; s: number }>();
  for (const r of rows) {
    const into = r.kind === kind ? all : voted;
    const group = into.get(r.key) ?? { n: 0, s: 0 };
    group.n += Number(r.n);
    if (r.value === '1') group.s += Number(r.n);
    into.set(r.key, group);
  }
  // '=' and the booth key or part number; '' for none.
  const k = (key: string) => (key === '' ? null : groupBy === 'booth' ? key.slice(1) : Number(key.slice(1)));
  const held = [...all].filter(([, g]) => g.n > 0);
  return [
    { rows: held.map(([key, g]) => ({ k: k(key), n: g.n })) },
    { rows: held.map(([key, g]) => ({ k: k(key), n: g.s })) },
    { rows: [...voted].filter(([, g]) => g.n > 0).map(([key, g]) => ({ k: k(key), n: g.n, s: g.s })) },
  ];
}

/** Each booth key's name as voters write it: one voter's, found through the booth index, per key. */
async function boothNames(db: Executor, workspaceId: number, keys: string[]): Promise<Map<string, string>> {
  if (keys.length === 0) return new Map();
  const list = isPostgres(db)
    ? sql`(SELECT unnest(${keys}::text[]) AS booth_key)`
    : sql`(SELECT value AS booth_key FROM json_each(${JSON.stringify(keys)}))`;
  const rows = await sql<{ k: string; name: string | null }>`SELECT k.booth_key AS k,
      (SELECT v.booth FROM voters v WHERE v.workspace_id = ${workspaceId} AND v.booth_key = k.booth_key LIMIT 1) AS name
    FROM ${list} k`.execute(db);
  return new Map(rows.rows.map((r) => [r.k, r.name ?? r.k]));
}
