import type { Kysely } from 'kysely';
import type { Database, LiveEventRow } from '../../db/schema.ts';
import type { Role } from '../../domain.ts';
import { deleteCreatedBefore } from '../../db/prune.ts';
import type { Executor } from '../../db/types.ts';
import { can, type Permission } from '../../http/permissions.ts';

/**
 * The events the live stream carries, and who may see each: conversation events their assignee (and managers
 * and politicians, who see every conversation); the others whoever holds the permission that reads them.
 * Message delivery reports (`message.delivered`, `message.failed`) are not streamed: a broadcast makes one per
 * message; a console reads a campaign's progress from the campaign.
 */
const visibleWith: Record<string, Permission | 'conversation'> = {
  'message.received': 'conversation',
  'conversation.created': 'conversation',
  'conversation.assigned': 'conversation',
  'grievance.created': 'grievances:read',
  'grievance.resolved': 'grievances:read',
  'payment.processed': 'payments:manage',
  'channel_account.failed': 'channels:manage',
};

export const liveEventTypes = Object.keys(visibleWith);

/** Writes a live event in the caller's transaction (types the stream does not carry are skipped). */
export async function recordLive(
  trx: Executor,
  workspaceId: number,
  type: string,
  data: unknown,
  assignedTo: number | null,
  now: string,
): Promise<void> {
  if (!(type in visibleWith)) return;
  await trx
    .insertInto('live_events')
    .values({
      workspace_id: workspaceId,
      type,
      data: JSON.stringify(data),
      assigned_to: assignedTo,
      created_at: now,
    })
    .execute();
}

export interface Viewer {
  userId: number;
  role: Role;
}

/** Whether the viewer may see the event: a volunteer only their own conversations' events. */
export function visibleTo(event: Pick<LiveEventRow, 'type' | 'assigned_to'>, viewer: Viewer): boolean {
  const rule = visibleWith[event.type];
  if (!rule) return false;
  if (rule === 'conversation')
    return (
      viewer.role !== 'volunteer' ||
      (event.assigned_to !== null && Number(event.assigned_to) === viewer.userId)
    );
  return can(viewer.role, rule);
}

export interface Listener {
  workspaceId: number;
  viewer: Viewer;
  send(event: LiveEventRow): void;
}

/** How often the hub reads new events while streams are open: the stream's latency is at most about this. */
const POLL_MS = 50;
/** What Last-Event-ID can resume: the last this many of the workspace's events. */
export const RESUME_LIMIT = 1000;
/** Events are kept this long for resuming; older ones are deleted by the delivery worker's chores. */
const KEEP_MS = 3600_000;

/** Deletes the events older than KEEP_MS, in bounded batches (a backlog goes over the next rounds). */
export function pruneLiveEvents(db: Executor, nowMs = Date.now()): Promise<number> {
  return deleteCreatedBefore(db, 'live_events', new Date(nowMs - KEEP_MS).toISOString());
}
/**
 * Ids are given in insert order, but on PostgreSQL a transaction that took an id may commit after one that took
 * a later id: each read looks back this far below the last id seen (and skips what it already sent).
 */
const LOOK_BACK = 200;

/**
 * One per API process: reads the events every process writes to `live_events` (the database carries them
 * between processes, so nothing else is needed to scale out) and hands each to the open streams of its
 * workspace that may see it. It reads only while a stream is open.
 */
export class EventHub {
  private readonly listeners = new Set<Listener>();
  private lastId = 0;
  private readonly sent = new Set<number>();
  private timer: NodeJS.Timeout | undefined;
  private reading = false;
  private ready: Promise<void> | undefined;

  constructor(private readonly db: Kysely<Database>) {}

  /** Registers a stream; the events after `after` (Last-Event-ID) come first, at most RESUME_LIMIT. */
  async add(listener: Listener, after: number | undefined): Promise<void> {
    // A failed start (the database away) is tried again by the next stream, not kept.
    await (this.ready ??= this.start().catch((error: unknown) => {
      this.ready = undefined;
      throw error;
    }));
    this.listeners.add(listener);
    this.schedule();
    if (after === undefined) return;
    const missed = await this.db
      .selectFrom('live_events')
      .selectAll()
      .where('workspace_id', '=', listener.workspaceId)
      .where('id', '>', after)
      .where('id', '<=', this.lastId)
      .orderBy('id', 'desc')
      .limit(RESUME_LIMIT)
      .execute();
    for (const event of missed.reverse()) if (visibleTo(event, listener.viewer)) listener.send(event);
  }

  remove(listener: Listener): void {
    this.listeners.delete(listener);
  }

  count(): number {
    return this.listeners.size;
  }

  close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.listeners.clear();
  }

  private async start(): Promise<void> {
    const last = await this.db
      .selectFrom('live_events')
      .select((eb) => eb.fn.max('id').as('id'))
      .executeTakeFirst();
    this.lastId = Number(last?.id ?? 0);
    // What is already there is not new: only Last-Event-ID resumes it.
    const window = await this.db
      .selectFrom('live_events')
      .select('id')
      .where('id', '>', Math.max(0, this.lastId - LOOK_BACK))
      .execute();
    for (const row of window) this.sent.add(Number(row.id));
  }

  private schedule(): void {
    if (this.timer || this.listeners.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.read().finally(() => this.schedule());
    }, POLL_MS);
    this.timer.unref();
  }

  private async read(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      const rows = await this.db
        .selectFrom('live_events')
        .selectAll()
        .where('id', '>', Math.max(0, this.lastId - LOOK_BACK))
        .orderBy('id')
        .limit(5000)
        .execute();
      for (const row of rows) {
        const id = Number(row.id);
        if (this.sent.has(id) || id <= this.lastId - LOOK_BACK) continue;
        this.sent.add(id);
        if (id > this.lastId) this.lastId = id;
        for (const listener of this.listeners) {
          if (Number(listener.workspaceId) === Number(row.workspace_id) && visibleTo(row, listener.viewer))
            listener.send(row);
        }
      }
      for (const id of this.sent) if (id <= this.lastId - LOOK_BACK) this.sent.delete(id);
    } catch {
      // A database hiccup: the next read tries again (the streams stay open).
    } finally {
      this.reading = false;
    }
  }
}
