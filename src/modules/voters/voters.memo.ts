import type { Executor } from '../../db/types.ts';

/** The row at `position` (0-based, in id order) of a filtered list has id `id`. */
export interface Anchor {
  readonly position: number;
  readonly id: number;
}

/**
 * What a filtered voter list has cost to work out: its exact total and where some of its pages start, for
 * one version of the workspace's voters (`voter_counts.version`, changed by triggers in the same transaction
 * as any create, update or delete). A request that sees a newer version brings it forward through the
 * changes logged in between (`voter_changes`, see advanceMemo) or, when it cannot, works it out again: it
 * is never stale.
 */
export interface ListMemo {
  readonly version: number;
  readonly total: number;
  readonly anchors: Map<number, number>;
  /** Every matching id in order, kept for searches with few matches (PostgreSQL), so each page is a lookup. */
  readonly ids?: number[] | undefined;
}

/**
 * The filtered and searched columns of a voter, before or after a change. `name` null: the text was not
 * kept (a deleted voter's name, email and phone are not logged), so a search cannot tell.
 */
export interface VoterValues {
  readonly name: string | null;
  readonly email: string | null;
  readonly phone: string | null;
  readonly constituency_key: string | null;
  readonly booth: string | null;
  readonly ward: string | null;
}

/** One logged change: `before` is undefined for a create, `after` for a delete. */
export interface VoterChange {
  readonly version: number;
  readonly voterId: number;
  readonly before?: VoterValues | undefined;
  readonly after?: VoterValues | undefined;
}

/** Whether a voter's values match a list's filters; undefined when that cannot be told outside the database. */
export type Matcher = (values: VoterValues) => boolean | undefined;

const MAX_ANCHORS = 32;

/** How often lists were worked out from the database, and how often brought forward (for the tests). */
export const memoStats = { computed: 0, advanced: 0 };

export function nearestAnchor(memo: ListMemo, position: number): Anchor | undefined {
  let best: Anchor | undefined;
  for (const [p, id] of memo.anchors)
    if (p <= position && (!best || p > best.position)) best = { position: p, id };
  return best;
}

export function addAnchor(memo: ListMemo, anchor: Anchor): void {
  if (memo.anchors.size >= MAX_ANCHORS && !memo.anchors.has(anchor.position)) {
    memo.anchors.delete(memo.anchors.keys().next().value as number);
  }
  memo.anchors.set(anchor.position, anchor.id);
}

function insertSorted(ids: number[], id: number): void {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid]! < id) lo = mid + 1;
    else hi = mid;
  }
  if (ids[lo] !== id) ids.splice(lo, 0, id);
}

function removeSorted(ids: number[], id: number): void {
  const at = ids.indexOf(id);
  if (at >= 0) ids.splice(at, 1);
}

/**
 * Brings `memo` forward to `version` through `changes`, which must hold every version after the memo's up to
 * `version` (in version order): a version without rows was a bulk change that was not logged. Each change
 * moves the total by whether the voter matched before and after, and every remembered page start after the
 * voter by the same amount (the order is by id). Undefined when it cannot be done: then count again.
 */
export function advanceMemo(
  memo: ListMemo,
  version: number,
  changes: readonly VoterChange[],
  matches: Matcher,
  maxIds: number,
): ListMemo | undefined {
  let expected = memo.version + 1;
  for (const change of changes) {
    if (change.version === expected) expected += 1;
    else if (change.version !== expected - 1) return undefined;
  }
  if (expected !== version + 1) return undefined;

  let total = memo.total;
  let anchors = [...memo.anchors];
  const ids = memo.ids ? [...memo.ids] : undefined;
  for (const { voterId, before, after } of changes) {
    const was = before ? matches(before) : false;
    const is = after ? matches(after) : false;
    if (was === undefined || is === undefined) return undefined;
    if (was === is) continue;
    const delta = is ? 1 : -1;
    total += delta;
    anchors = anchors.flatMap(([position, id]): [number, number][] => {
      if (id > voterId) return [[position + delta, id]];
      if (id === voterId) return []; // its own voter left the list
      return [[position, id]];
    });
    if (ids) {
      if (is) insertSorted(ids, voterId);
      else removeSorted(ids, voterId);
    }
  }
  if (total < 0) return undefined;
  return { version, total, anchors: new Map(anchors), ids: ids && ids.length <= maxIds ? ids : undefined };
}

/** Least recently used memos of one database, by workspace and filters. */
class ListMemos {
  private readonly entries = new Map<string, ListMemo>();

  constructor(private readonly capacity: number) {}

  /** The memo for `key`, of whatever version it was worked out for. */
  get(key: string): ListMemo | undefined {
    const memo = this.entries.get(key);
    if (!memo) return undefined;
    this.entries.delete(key);
    this.entries.set(key, memo);
    return memo;
  }

  /** Keeps `memo` unless a memo of a newer version is already there (concurrent requests). */
  set(key: string, memo: ListMemo): void {
    const known = this.entries.get(key);
    if (known && known.version > memo.version) return;
    this.entries.delete(key);
    this.entries.set(key, memo);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value as string);
  }
}

const byDatabase = new WeakMap<object, ListMemos>();

/**
 * The memos of the database behind `db` (per process; every process checks the version, so several API
 * processes never serve each other's stale results). None inside a transaction: what it sees may never
 * be committed.
 */
export function listMemos(db: Executor): ListMemos | undefined {
  if (db.isTransaction) return undefined;
  let memos = byDatabase.get(db);
  if (!memos) {
    memos = new ListMemos(2000);
    byDatabase.set(db, memos);
  }
  return memos;
}
