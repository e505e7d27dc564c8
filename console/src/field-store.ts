import { type DBSchema, deleteDB, type IDBPDatabase, openDB } from 'idb';
import { session } from './api.ts';

/**
 * What a canvasser's device keeps for working without the network (the contract's fourth part, "Offline"): the
 * turfs and the walk lists they opened (up to 2,000 voters each), and the visits and poll-day marks made and not
 * yet sent. The queue is sent when the network is back, with backoff, and survives a reload; each item carries the
 * `client_id` the API applies once, so a batch sent twice is stored once. Signing out deletes the whole database.
 * Nothing sensitive is kept: a volunteer's walk list has no support level, and their visits carry none.
 */

const NAME = 'ces-field';

export interface QueuedVisit {
  kind: 'visit';
  client_id: string;
  queued_at: number;
  body: {
    client_id: string;
    voter_id: number;
    outcome: string;
    support_level?: number;
    tags_add?: string[];
    note?: string;
    survey_id?: string;
    answers?: Record<string, string | number>;
    visited_at: string;
  };
}

export interface QueuedMark {
  kind: 'mark';
  client_id: string;
  queued_at: number;
  body: {
    client_id: string;
    voter_id?: number;
    part_number?: number;
    serial_number?: number;
    voted: boolean;
    marked_at: string;
  };
}

export type Queued = QueuedVisit | QueuedMark;

interface FieldDb extends DBSchema {
  /** Cached answers by key: `turfs`, `walk:<turf id>`. */
  cache: { key: string; value: { at: number; value: unknown } };
  queue: { key: string; value: Queued; indexes: { queued_at: number } };
  /** What the service refused, kept to show the canvasser (client_id -> the reason). */
  refused: { key: string; value: { item: Queued; message: string } };
}

let opened: Promise<IDBPDatabase<FieldDb>> | undefined;

function store(): Promise<IDBPDatabase<FieldDb>> {
  opened ??= openDB<FieldDb>(NAME, 1, {
    upgrade(db) {
      db.createObjectStore('cache');
      db.createObjectStore('queue', { keyPath: 'client_id' }).createIndex('queued_at', 'queued_at');
      db.createObjectStore('refused', { keyPath: 'item.client_id' });
    },
  });
  return opened;
}

export async function cached<T>(key: string): Promise<T | undefined> {
  return (await (await store()).get('cache', key))?.value as T | undefined;
}

export async function keep(key: string, value: unknown): Promise<void> {
  await (await store()).put('cache', { at: Date.now(), value }, key);
}

/** Listeners of the queue's length (the "n waiting" line). */
const listeners = new Set<(waiting: number) => void>();

export function onQueue(listener: (waiting: number) => void): () => void {
  listeners.add(listener);
  void waiting().then(listener);
  return () => void listeners.delete(listener);
}

async function told(): Promise<void> {
  const n = await waiting();
  for (const listener of listeners) listener(n);
}

export async function waiting(): Promise<number> {
  return (await store()).count('queue');
}

export async function enqueue(item: Queued): Promise<void> {
  await (await store()).put('queue', item);
  await told();
  void flush();
}

export async function refused(): Promise<Array<{ item: Queued; message: string }>> {
  return (await store()).getAll('refused');
}

/** Deletes everything the device holds (signing out). */
export async function clearDevice(): Promise<void> {
  const db = await opened?.catch(() => undefined);
  db?.close();
  opened = undefined;
  clearTimeout(timer);
  // Nobody is told (a listener would read, and so open it again): the screens that listen are leaving.
  await deleteDB(NAME);
}

interface BatchAnswer {
  client_id: string;
  status: 'created' | 'duplicate' | 'rejected';
  error?: { message: string };
}

/** Sends one kind's batch (at most 500); the items the service took or refused leave the queue. */
async function send(kind: Queued['kind'], items: Queued[]): Promise<void> {
  const token = session.token();
  if (!token || items.length === 0) return;
  const path = kind === 'visit' ? '/api/visits' : '/api/poll-day/marks';
  const field = kind === 'visit' ? 'visits' : 'marks';
  const res = await fetch(path, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ [field]: items.map((i) => i.body) }),
  });
  if (
    res.status === 401 ||
    res.status === 408 ||
    res.status === 429 ||
    res.status >= 500 ||
    (!res.ok && res.status < 400)
  )
    throw new Error(String(res.status));
  const db = await store();
  if (!res.ok) {
    // Refused whole (the member lost the role, a malformed item): kept to show, never sent again.
    const message =
      ((await res.json().catch(() => ({}))) as { message?: string }).message ?? String(res.status);
    const tx = db.transaction(['queue', 'refused'], 'readwrite');
    for (const item of items) {
      await tx.objectStore('refused').put({ item, message });
      await tx.objectStore('queue').delete(item.client_id);
    }
    await tx.done;
    return;
  }
  const answers = ((await res.json()) as { data: Record<string, BatchAnswer[]> }).data[field] ?? [];
  const tx = db.transaction(['queue', 'refused'], 'readwrite');
  for (const answer of answers) {
    const item = items.find((i) => i.client_id === answer.client_id);
    if (answer.status === 'rejected' && item)
      await tx.objectStore('refused').put({ item, message: answer.error?.message ?? '' });
    await tx.objectStore('queue').delete(answer.client_id);
  }
  await tx.done;
}

let flushing: Promise<void> | undefined;
let delay = 1000;
let timer: ReturnType<typeof setTimeout> | undefined;

/**
 * Sends what waits, oldest first, in batches of 500 by kind. On a failure (no network, the service down) it tries
 * again after a delay that doubles up to a minute; the browser's `online` event tries at once.
 */
export function flush(): Promise<void> {
  flushing ??= (async () => {
    try {
      const db = await store();
      for (;;) {
        const items = await db.getAllFromIndex('queue', 'queued_at', undefined, 500);
        if (items.length === 0) break;
        const kind = items[0]!.kind;
        await send(
          kind,
          items.filter((i) => i.kind === kind),
        );
        await told();
      }
      delay = 1000;
    } catch {
      clearTimeout(timer);
      timer = setTimeout(() => void flush(), delay);
      delay = Math.min(delay * 2, 60_000);
    } finally {
      flushing = undefined;
    }
  })();
  return flushing;
}

if (typeof window !== 'undefined') {
  window.addEventListener('online', () => {
    delay = 1000;
    void flush();
  });
}
