import { type Kysely, sql } from 'kysely';
import { nowIso } from '../../db/connect.ts';
import { isPostgres } from '../../db/dialect.ts';
import type { Database, VoterTagJobRow } from '../../db/schema.ts';
import type { Executor } from '../../db/types.ts';
import { notFound, validationError } from '../../errors.ts';
import type { Role } from '../../domain.ts';
import { ChunkPacer } from '../../lib/pacing.ts';

import { type AuditActor, recordAudit } from '../audit/audit.repository.ts';
import { checkTags } from './voter-record.rules.ts';
import { nameTags } from './voter-record.repository.ts';
import {
  checkChange,
  checkSet,
  labels,
  type SetValues,
  type TagChange,
  type TagBody,
  tagJobView,
} from './voter-tags.rules.ts';
import { fieldDefs } from './voter-fields.ts';
import {
  checkVoterFilters,
  filteredVoters,
  type IdRange,
  type VoterFilters,
  withPlaces,
} from './voters.search.ts';

/** The time one chunk of a bulk tagging job aims to take (see ChunkPacer). */
const TAGGING_CHUNK_MS = 50;

/**
 * Bulk tagging (the contract's fourth part): `POST /api/voters/tags` adds and removes tags on up to 1,000
 * voters by id at once (200 with the count changed), or on every voter a filter matches as a job (202),
 * applied in id-ordered chunks sized by time (ChunkPacer), with other requests served between two.
 *
 * A chunk is one transaction that ends by moving the job's cursor from where it found it; a second process
 * working the same job finds the cursor moved, and its transaction rolls back: each chunk is applied once,
 * with no lease to keep.
 */

export const TAG_IDS_MAX = 1000;

/** Voters of `voters` whose tags the change alters: missing a tag to add, or holding one to remove. */
function changedCount(
  db: Executor,
  workspaceId: number,
  change: TagChange,
  voters: ReturnType<typeof filteredVoters>,
) {
  const addKeys = change.add.map((t) => t.key);
  const removeKeys = change.remove.map((t) => t.key);
  return voters
    .where((eb) => {
      const ors = [];
      if (addKeys.length > 0)
        ors.push(
          eb(
            eb
              .selectFrom('voter_tags')
              .select((e) => e.fn.countAll<number>().as('n'))
              .where('voter_tags.workspace_id', '=', workspaceId)
              .whereRef('voter_tags.voter_id', '=', 'voters.id')
              .where('voter_tags.tag_key', 'in', addKeys),
            '<',
            addKeys.length,
          ),
        );
      if (removeKeys.length > 0)
        ors.push(
          eb(
            'voters.id',
            'in',
            eb
              .selectFrom('voter_tags')
              .select('voter_tags.voter_id')
              .where('voter_tags.workspace_id', '=', workspaceId)
              .where('voter_tags.tag_key', 'in', removeKeys),
          ),
        );
      return eb.or(ors);
    })
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow()
    .then((r) => Number(r.n));
}

/** Applies the change to `voters` (a query of voters.id); returns how many voters it changed. */
async function applyChange(
  db: Executor,
  workspaceId: number,
  change: TagChange,
  voters: () => ReturnType<typeof filteredVoters>,
): Promise<number> {
  const set = change.set;
  // A bulk edit's values: set on every voter it reaches (each counts as changed).
  const reached = set
    ? Number(
        (
          await voters()
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      )
    : 0;
  if (set) await setValues(db, workspaceId, set, voters);
  const tagged =
    change.add.length + change.remove.length > 0 ? await changedCount(db, workspaceId, change, voters()) : 0;
  const changed = Math.max(reached, tagged);
  if (tagged === 0) return changed;
  for (const tag of change.add) {
    const rows = voters().select([
      sql<number>`${workspaceId}`.as('workspace_id'),
      sql<string>`${tag.key}`.as('tag_key'),
      'voters.id',
    ]);
    await db
      .insertInto('voter_tags')
      .columns(['workspace_id', 'tag_key', 'voter_id'])
      // PostgreSQL has no foreign key here (migration 039): the voters tagged are held against a delete until
      // this commits, so a voter deleted meanwhile takes its new tags with it. SQLite's key does the same.
      .expression((isPostgres(db) ? rows.forKeyShare() : rows) as never)
      .onConflict((oc) => oc.doNothing())
      .execute();
  }
  if (change.remove.length > 0)
    await db
      .deleteFrom('voter_tags')
      .where('workspace_id', '=', workspaceId)
      .where(
        'tag_key',
        'in',
        change.remove.map((t) => t.key),
      )
      .where('voter_id', 'in', voters().select('voters.id'))
      .execute();
  return changed;
}

/** A bulk edit's `set` applied to `voters` (a query of voters.id), in the caller's transaction. */
async function setValues(
  db: Executor,
  workspaceId: number,
  set: SetValues,
  voters: () => ReturnType<typeof filteredVoters>,
): Promise<void> {
  const now = nowIso();
  if (set.language !== undefined || set.support_level !== undefined)
    await db
      .updateTable('voters')
      .set({
        ...(set.language !== undefined ? { language: set.language } : {}),
        ...(set.support_level !== undefined ? { support_level: set.support_level } : {}),
        updated_at: now,
      })
      .where('workspace_id', '=', workspaceId)
      .where('id', 'in', voters().select('voters.id'))
      .execute();
  for (const [key, value] of set.fields ?? []) {
    if (value === null) {
      await db
        .deleteFrom('voter_field_values')
        .where('workspace_id', '=', workspaceId)
        .where('field_key', '=', key)
        .where('voter_id', 'in', voters().select('voters.id'))
        .execute();
      continue;
    }
    const rows = voters().select([
      'voters.id',
      sql<number>`${workspaceId}`.as('workspace_id'),
      sql<string>`${key}`.as('field_key'),
      sql<string | null>`${value.value_text}`.as('value_text'),
      sql<number | null>`${value.value_number}`.as('value_number'),
    ]);
    await db
      .insertInto('voter_field_values')
      .columns(['voter_id', 'workspace_id', 'field_key', 'value_text', 'value_number'])
      // As for tags (applyChange): the voters are held against a delete until this commits.
      .expression((isPostgres(db) ? rows.forKeyShare() : rows) as never)
      .onConflict((oc) =>
        oc.columns(['voter_id', 'field_key']).doUpdateSet((eb) => ({
          value_text: eb.ref('excluded.value_text'),
          value_number: eb.ref('excluded.value_number'),
        })),
      )
      .execute();
    // Field work's conflicts: the bulk edit is a change an older offline visit does not undo (a changed value is
    // stamped by a trigger too; a value given to an empty field only here).
    await db
      .insertInto('voter_stamps')
      .columns(['voter_id', 'field', 'at'])
      .expression(
        voters().select([
          'voters.id',
          sql<string>`${`fields.${key}`}`.as('field'),
          (isPostgres(db) ? sql<string>`${now}::timestamptz` : sql<string>`${now}`).as('at'),
        ]) as never,
      )
      .onConflict((oc) => oc.columns(['voter_id', 'field']).doUpdateSet({ at: now }))
      .execute();
  }
}

export class VoterTagging {
  private wake: (() => void) | undefined;

  constructor(private readonly deps: { db: Kysely<Database> }) {}

  /** Set by the job loop: called when a job is queued, so it starts without waiting for the next poll. */
  onQueued(wake: () => void): void {
    this.wake = wake;
  }

  async tag(workspaceId: number, actor: AuditActor, body: TagBody, role: Role = 'politician') {
    const { db } = this.deps;
    const set = checkSet(
      body.set,
      body.set?.fields !== undefined ? await fieldDefs(db, workspaceId) : [],
      role,
    );
    const change = checkChange(body, set);
    if (body.voter_ids !== undefined) {
      const ids = [...new Set(body.voter_ids)];
      if (ids.length === 0 || ids.length > TAG_IDS_MAX)
        throw validationError({
          voter_ids: [`must hold 1 to ${TAG_IDS_MAX} voter ids; for more, use filters.`],
        });
      return db.transaction().execute(async (trx) => {
        const found = await trx
          .selectFrom('voters')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('workspace_id', '=', workspaceId)
          .where('id', 'in', ids)
          .executeTakeFirstOrThrow();
        if (Number(found.n) !== ids.length)
          throw validationError({ voter_ids: ['holds ids that are not voters of this workspace.'] });
        await nameTags(trx, workspaceId, change.add);
        const changed = await applyChange(trx, workspaceId, change, () =>
          trx
            .selectFrom('voters')
            .where('voters.workspace_id', '=', workspaceId)
            .where('voters.id', 'in', ids),
        );
        await recordAudit(trx, {
          workspaceId,
          actor,
          action: 'voters.tagged',
          details: { by: 'voter_ids', voters: ids.length, changed, ...labels(change) },
        });
        return { job: undefined, changed };
      });
    }
    const filters = await checkVoterFilters(db, workspaceId, body.filters ?? {}, true, 'filters.');
    const now = nowIso();
    const row = await db.transaction().execute(async (trx) => {
      await nameTags(trx, workspaceId, change.add);
      const job = await trx
        .insertInto('voter_tag_jobs')
        .values({
          workspace_id: workspaceId,
          status: 'queued',
          add_tags: JSON.stringify(change.add.map((t) => t.label)),
          remove_tags: JSON.stringify(change.remove.map((t) => t.label)),
          set_values: set ? JSON.stringify(set) : null,
          filters: JSON.stringify(filters),
          created_by: actor.userId,
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      await recordAudit(trx, {
        workspaceId,
        actor,
        action: 'voters.tagged',
        target: { type: 'voter_tag_job', id: Number(job.id) },
        details: { by: 'filters', filters, ...labels(change) },
      });
      return job;
    });
    this.wake?.();
    return { job: tagJobView(row), changed: undefined };
  }

  async job(workspaceId: number, id: number) {
    const row = await this.deps.db
      .selectFrom('voter_tag_jobs')
      .selectAll()
      .where('workspace_id', '=', workspaceId)
      .where('id', '=', id)
      .executeTakeFirst();
    if (!row) throw notFound('Tagging job');
    return tagJobView(row);
  }

  /** Each running job's chunk size, learnt from its chunks' times. */
  private readonly pacers = new Map<number, ChunkPacer>();

  /**
   * Runs every unfinished job to its end (`workspaceIds`: only theirs, for tests sharing a database); returns
   * how many chunks it applied. Each round applies one chunk of each workspace's oldest job, so a workspace
   * that queues many jobs over a large roll takes its turn beside the others, never ahead of them.
   * `stopping` is asked between chunks.
   */
  async runPending(
    options: { workspaceIds?: readonly number[]; stopping?: () => boolean } = {},
  ): Promise<number> {
    const { db } = this.deps;
    let chunks = 0;
    for (;;) {
      let query = db
        .selectFrom('voter_tag_jobs')
        .selectAll()
        .where('status', 'in', ['queued', 'running'])
        .orderBy('id')
        .limit(200);
      if (options.workspaceIds) query = query.where('workspace_id', 'in', [...options.workspaceIds]);
      const jobs = await query.execute();
      if (jobs.length === 0) return chunks;
      const served = new Set<number>();
      let applied = 0;
      for (const job of jobs) {
        if (served.has(Number(job.workspace_id))) continue;
        served.add(Number(job.workspace_id));
        applied += await this.runChunk(job);
        if (options.stopping?.()) return chunks + applied;
      }
      chunks += applied;
      // Every chunk was taken by another process: leave the jobs to it until the next poll.
      if (applied === 0) return chunks;
    }
  }

  /** One chunk of a job (the first counts its voters); 1 when applied, 0 when another process took it. */
  private async runChunk(job: VoterTagJobRow): Promise<number> {
    const { db } = this.deps;
    const ws = Number(job.workspace_id);
    const id = Number(job.id);
    try {
      const filters = await withPlaces(db, ws, JSON.parse(job.filters) as VoterFilters);
      const change: TagChange = {
        add: checkTags(JSON.parse(job.add_tags)).tags ?? [],
        remove: checkTags(JSON.parse(job.remove_tags)).tags ?? [],
        set: job.set_values ? (JSON.parse(job.set_values) as SetValues) : undefined,
      };
      if (job.status === 'queued') {
        const total = await filteredVoters(db, ws, filters)
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow();
        await db
          .updateTable('voter_tag_jobs')
          .set({ status: 'running', total: Number(total.n), updated_at: nowIso() })
          .where('id', '=', id)
          .where('status', '=', 'queued')
          .execute();
      }
      // Chunks of about TAGGING_CHUNK_MS, below the usual 70: a chunk holds SQLite's one connection, so a
      // request of another workspace arriving just after one starts waits for all of it (the goal is 100 ms,
      // and at 70 the longest wait measured 98-108 ms on a slow afternoon).
      const pacer = this.pacers.get(id) ?? new ChunkPacer(2000, 200, 50_000, TAGGING_CHUNK_MS);
      this.pacers.set(id, pacer);
      const after = Number(job.after_id);
      const size = pacer.size;
      const started = performance.now();
      const last = await filteredVoters(db, ws, filters)
        .where('voters.id', '>', after)
        .select('voters.id')
        .orderBy('voters.id')
        .limit(1)
        .offset(size - 1)
        .executeTakeFirst();
      const range: IdRange = { after, upTo: last ? Number(last.id) : Number.MAX_SAFE_INTEGER };
      const done = await db.transaction().execute(async (trx) => {
        const changed = await applyChange(trx, ws, change, () => filteredVoters(trx, ws, filters, range));
        const finished = !last;
        const result = await trx
          .updateTable('voter_tag_jobs')
          .set((eb) => ({
            after_id: finished ? after : range.upTo,
            changed: eb('changed', '+', changed),
            status: finished ? 'completed' : 'running',
            updated_at: nowIso(),
          }))
          .where('id', '=', id)
          .where('after_id', '=', after)
          .where('status', '=', 'running')
          .executeTakeFirst();
        // Another process applied this chunk first: roll this one back.
        if (Number(result.numUpdatedRows) !== 1) throw new ChunkTaken();
        return finished;
      });
      if (done) this.pacers.delete(id);
      else await pacer.pause(size, performance.now() - started);
      return 1;
    } catch (error) {
      this.pacers.delete(id);
      if (error instanceof ChunkTaken) return 0;
      await db
        .updateTable('voter_tag_jobs')
        .set({
          status: 'failed',
          error: 'The tagging stopped on an internal error; run it again.',
          updated_at: nowIso(),
        })
        .where('id', '=', id)
        .execute();
      throw error;
    }
  }
}

class ChunkTaken extends Error {}
