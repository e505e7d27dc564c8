import { EventEmitter } from 'node:events';
import { type Kysely, sql } from 'kysely';
import type { Database, LiveEventRow } from '../../db/schema.ts';
import type { Role } from '../../domain.ts';
import { isPostgres } from '../../db/dialect.ts';
import { listen } from '../../db/notify.ts';
import { deleteCreatedBefore } from '../../db/prune.ts';
import type { Executor } from '../../db/types.ts';
import { can, type Permission } from '../../http/permissions.ts';

/**
 * The events the live stream carries, and who may see each: conversation events their assignee (and managers
 * and politicians, who see every conversation); the others whoever holds the permission that reads them.
 * Message delivery reports (`message.delivered`, `message.failed`) are not streamed: a broadcast makes one per
 * message; a console reads a campaign's progress from the campaign.
 */
const visibleWith: Record<string, Permission | 'conversation' | 'grievance' | 'mark'> = {
  'message.received': 'conversation',
  'conversation.created': 'conversation',
  'conversation.assigned': 'conversation',
  'grievance.created': 'grievance',
  'grievance.resolved': 'grievance',
  'payment.processed': 'payments:manage',
  'channel_account.failed': 'channels:manage',
  'survey.response.completed': 'surveys:manage',
  'poll_day.marked': 'mark',
  'privacy_request.due_soon': 'privacy:requests',
};

export const liveEventTypes = Object.keys(visibleWith);

/** The PostgreSQL channel that carries each committed event's `<id> <workspace id>` to every API process. */
const CHANNEL = 'ces_live_events';
/** SQLite is one process: its writers tell its hubs here (an event is read only once its transaction ends). */
const localBus = new EventEmitter().setMaxListeners(0);

/**
 * Writes a live event in the caller's transaction (types the stream does not carry are skipped) and tells the
 * hubs: on PostgreSQL with `pg_notify` in the same transaction, which the server delivers at commit (never for a
 * rollback, and a late commit is delivered when it commits); on SQLite in-process, where the hub's read waits
 * for the one connection this transaction holds.
 */
export async function recordLive(
  trx: Executor,
  workspaceId: number,
  type: string,
  data: unknown,
  assignedTo: number | null,
  now: string,
): Promise<void> {
  if (!(type in visibleWith)) return;
  const row = await trx
    .insertInto('live_events')
    .values({
      workspace_id: workspaceId,
      type,
      data: JSON.stringify(data),
      assigned_to: assignedTo,
      created_at: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  if (isPostgres(trx)) await sql`SELECT pg_notify(${CHANNEL}, ${`${row.id} ${workspaceId}`})`.execute(trx);
  else localBus.emit('event', Number(row.id), workspaceId);
}

export interface Viewer {
  userId: number;
  role: Role;
}

/**
 * Whether the viewer may see the event: a volunteer only their own conversations' events, and of the grievances
 * only those assigned to them (a grievance carries the voter's own words, name and phone: the stream never gives a
 * volunteer one the API would not, contract's fifth part).
 */
export function visibleTo(event: Pick<LiveEventRow, 'type' | 'assigned_to'>, viewer: Viewer): boolean {
  const rule = visibleWith[event.type];
  if (!rule) return false;
  const theirs = event.assigned_to !== null && Number(event.assigned_to) === viewer.userId;
  if (rule === 'conversation') return viewer.role !== 'volunteer' || theirs;
  // A poll-day mark: the office's booth board, and the member who made it (a volunteer sees only their own).
  if (rule === 'mark') return can(viewer.role, 'turfs:manage') || theirs;
  if (rule === 'grievance')
    return can(viewer.role, 'grievances:read') && (viewer.role !== 'volunteer' || theirs);
  return can(viewer.role, rule);
}

export interface Listener {
  workspaceId: number;
  viewer: Viewer;
  send(event: LiveEventRow): void;
}

/** What Last-Event-ID can resume: the last this many of the workspace's events (and what is kept of them). */
export const RESUME_LIMIT = 1000;
/** Events older than this are deleted whatever their number. */
const KEEP_MS = 86_400_000;
/** How often the workspaces that had new events are cut back to RESUME_LIMIT, and the old events deleted. */
const PRUNE_EVERY_MS = 1000;
const PRUNE_OLD_EVERY_MS = 60_000;

/** Deletes the events older than a day, in bounded batches (a backlog goes over the next rounds). */
export function pruneLiveEvents(db: Executor, nowMs = Date.now()): Promise<number> {
  return deleteCreatedBefore(db, 'live_events', new Date(nowMs - KEEP_MS).toISOString());
}

/** Deletes a workspace's events beyond its newest RESUME_LIMIT. */
export async function trimLiveEvents(db: Executor, workspaceId: number): Promise<number> {
  const result = await sql`DELETE FROM live_events WHERE workspace_id = ${workspaceId} AND id < (
      SELECT id FROM live_events WHERE workspace_id = ${workspaceId} ORDER BY id DESC LIMIT 1 OFFSET ${RESUME_LIMIT - 1})`.execute(
    db,
  );
  return Number(result.numAffectedRows ?? 0);
}

/** A stream as the hub keeps it: while its Last-Event-ID replay runs, live events wait in `queued`. */
interface Stream {
  listener: Listener;
  queued: LiveEventRow[] | undefined;
  replayed: Set<number> | undefined;
}

/**
 * One per API process. Events are pushed, not polled: each committed event's id reaches every process's hub
 * (PostgreSQL `LISTEN/NOTIFY`, or in-process on SQLite), which reads the rows of the ids that workspaces with open
 * streams wait for and hands each to the streams that may see it, in commit order, once. The table is there for
 * `Last-Event-ID`, and the hub keeps it short: each workspace's newest RESUME_LIMIT events, none older than a day
 * (it prunes whether or not a delivery worker runs).
 */
export class EventHub {
  private readonly streams = new Map<Listener, Stream>();
  /** Ids told and not yet read, in commit order, for workspaces with a stream open. */
  private pending: number[] = [];
  private pumping: Promise<void> | undefined;
  private highest = 0;
  private readonly dirty = new Set<number>();
  private pruneTimer: NodeJS.Timeout | undefined;
  private prunedOldAt = 0;
  private stopListening: (() => Promise<void>) | undefined;
  private readonly onLocal = (id: number, workspaceId: number) => this.told(id, workspaceId);

  constructor(
    private readonly db: Kysely<Database>,
    private readonly databaseUrl?: string,
  ) {}

  /** Starts hearing events (and pruning): at the app's start, so that pruning needs no stream open. */
  start(): void {
    if (this.pruneTimer) return;
    if (isPostgres(this.db)) {
      let connected = false;
      const listening = listen(
        this.databaseUrl!,
        CHANNEL,
        (payload) => {
          const [id, workspaceId] = payload.split(' ').map(Number);
          if (Number.isSafeInteger(id) && Number.isSafeInteger(workspaceId)) this.told(id!, workspaceId!);
        },
        () => {
          // After a lost connection: what was told meanwhile is read from the table.
          if (connected) void this.catchUp();
          connected = true;
        },
      );
      this.stopListening = () => listening.close();
    } else {
      localBus.on('event', this.onLocal);
      this.stopListening = async () => void localBus.off('event', this.onLocal);
    }
    this.pruneTimer = setInterval(() => void this.prune().catch(() => {}), PRUNE_EVERY_MS);
    this.pruneTimer.unref();
  }

  /** Registers a stream; the events after `after` (Last-Event-ID) come first, at most RESUME_LIMIT. */
  async add(listener: Listener, after: number | undefined): Promise<void> {
    this.start();
    const stream: Stream = { listener, queued: after === undefined ? undefined : [], replayed: undefined };
    this.streams.set(listener, stream);
    if (after === undefined) return;
    try {
      const missed = await this.db
        .selectFrom('live_events')
        .selectAll()
        .where('workspace_id', '=', listener.workspaceId)
        .where('id', '>', after)
        .orderBy('id', 'desc')
        .limit(RESUME_LIMIT)
        .execute();
      stream.replayed = new Set(missed.map((event) => Number(event.id)));
      for (const event of missed.reverse()) if (visibleTo(event, listener.viewer)) listener.send(event);
    } finally {
      const queued = stream.queued ?? [];
      stream.queued = undefined;
      for (const event of queued) if (!stream.replayed?.has(Number(event.id))) listener.send(event);
    }
  }

  remove(listener: Listener): void {
    this.streams.delete(listener);
  }

  count(): number {
    return this.streams.size;
  }

  close(): void {
    clearInterval(this.pruneTimer);
    this.pruneTimer = undefined;
    void this.stopListening?.();
    this.stopListening = undefined;
    this.streams.clear();
  }

  /** Cuts back the workspaces that had new events, and (each minute) deletes what is older than a day. */
  async prune(): Promise<void> {
    const workspaces = [...this.dirty];
    this.dirty.clear();
    for (const workspaceId of workspaces) await trimLiveEvents(this.db, workspaceId);
    if (Date.now() - this.prunedOldAt >= PRUNE_OLD_EVERY_MS) {
      this.prunedOldAt = Date.now();
      await pruneLiveEvents(this.db);
    }
  }

  private told(id: number, workspaceId: number): void {
    this.dirty.add(workspaceId);
    if (id > this.highest) this.highest = id;
    let wanted = false;
    for (const stream of this.streams.values())
      if (Number(stream.listener.workspaceId) === workspaceId) wanted = true;
    if (!wanted) return;
    this.pending.push(id);
    this.pumping ??= this.pump().finally(() => (this.pumping = undefined));
  }

  /** Reads the told ids' rows (after a tick, so that a burst is read in one query) and hands them out in order. */
  private async pump(): Promise<void> {
    while (this.pending.length > 0) {
      await new Promise((resolve) => setImmediate(resolve));
      const ids = [...new Set(this.pending.splice(0, 500))];
      try {
        const rows = await this.db.selectFrom('live_events').selectAll().where('id', 'in', ids).execute();
        const byId = new Map(rows.map((row) => [Number(row.id), row]));
        for (const id of ids) {
          const row = byId.get(id);
          if (row) this.deliver(row);
        }
      } catch {
        // The database is away: these events are lost to the open streams (a reconnect's Last-Event-ID finds them).
      }
    }
  }

  private deliver(row: LiveEventRow): void {
    for (const stream of this.streams.values()) {
      const { listener } = stream;
      if (Number(listener.workspaceId) !== Number(row.workspace_id) || !visibleTo(row, listener.viewer))
        continue;
      if (stream.queued) stream.queued.push(row);
      else listener.send(row);
    }
  }

  /** After the listening connection was lost: the events written since the highest one told. */
  private async catchUp(): Promise<void> {
    const workspaces = [...new Set([...this.streams.values()].map((s) => Number(s.listener.workspaceId)))];
    if (workspaces.length === 0) return;
    try {
      const rows = await this.db
        .selectFrom('live_events')
        .selectAll()
        .where('id', '>', this.highest)
        .where('workspace_id', 'in', workspaces)
        .orderBy('id')
        .limit(RESUME_LIMIT)
        .execute();
      for (const row of rows) {
        if (Number(row.id) > this.highest) this.highest = Number(row.id);
        this.deliver(row);
      }
    } catch {
      // the next reconnection tries again
    }
  }
}
