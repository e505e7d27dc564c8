import type { Executor } from '../../db/types.ts';

/** The row at `position` (0-based, in id order) of a filtered list has id `id`. */
export interface Anchor {
  readonly position: number;
  readonly id: number;
}

/**
 * What a filtered voter list has cost to work out: its exact total and where some of its pages start. Valid
 * for one version of the workspace's voters (`voter_counts.version`, changed by triggers in the same
 * transaction as any create, update or delete), so it is never stale: a request that sees another version
 * works everything out again.
 */
export interface ListMemo {
  readonly version: number;
  readonly total: number;
  readonly anchors: Map<number, number>;
  /** Every matching id in order, kept for searches with few matches (PostgreSQL), so each page is a lookup. */
  ids?: number[];
}

const MAX_ANCHORS = 32;

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

/** Least recently used memos of one database, by workspace and filters. */
class ListMemos {
  private readonly entries = new Map<string, ListMemo>();

  constructor(private readonly capacity: number) {}

  get(key: string, version: number): ListMemo | undefined {
    const memo = this.entries.get(key);
    if (!memo) return undefined;
    this.entries.delete(key);
    if (memo.version !== version) return undefined;
    this.entries.set(key, memo);
    return memo;
  }

  set(key: string, memo: ListMemo): void {
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
