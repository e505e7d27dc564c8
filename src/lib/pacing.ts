import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * Bulk work on SQLite runs synchronously on the process's one thread (better-sqlite3): while a statement
 * runs, no other request is answered, whichever workspace it is for. Bulk steps (an import's apply, an
 * opt-out import, a campaign's fill) are therefore cut into chunks sized by how long the last one took, so
 * that each holds the thread about `targetMs`, and the process serves other requests between two chunks.
 * The chunk size adapts to the machine, the table's size and its indexes instead of being a guessed row count.
 */
export class ChunkPacer {
  private current: number;

  constructor(
    first: number,
    private readonly min: number,
    private readonly max: number,
    private readonly targetMs = CHUNK_TARGET_MS,
  ) {
    this.current = first;
  }

  /** How many rows (or ids, or lines) the next chunk should take. */
  get size(): number {
    return this.current;
  }

  /**
   * Records that the last chunk of `size` units took `elapsedMs`, resizes the next one toward `targetMs`
   * (at most doubling at a time, so one fast chunk cannot make the next one huge), and lets the event loop
   * run everything waiting (timers, sockets) before the next chunk starts.
   */
  async pause(size: number, elapsedMs: number): Promise<void> {
    const perMs = size / Math.max(elapsedMs, 1);
    const wanted = Math.round(perMs * this.targetMs);
    this.current = Math.max(this.min, Math.min(this.max, wanted, this.current * 2));
    await nextTurn();
  }
}

/** Times `fn` for a ChunkPacer. */
export function timed<T>(fn: () => T): { result: T; ms: number } {
  const start = performance.now();
  const result = fn();
  return { result, ms: performance.now() - start };
}

/** The time one synchronous chunk of bulk work aims to hold the process (the goal is at most 100 ms). */
export const CHUNK_TARGET_MS = 70;

/** Lets every request and timer waiting behind synchronous work run. */
export const yieldToOthers = (): Promise<void> => nextTurn();
