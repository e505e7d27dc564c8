import type { Compilable, CompiledQuery, Kysely } from 'kysely';
import { isPostgres } from './dialect.ts';
import type { Database } from './schema.ts';
import type { Executor } from './types.ts';

/** Stands in for the i-th argument while the query is built, and marks where its value goes. */
class Slot {
  constructor(readonly index: number) {}
}

/** A query of a hot path, built and compiled once per dialect, then run with each call's values. */
export interface CompiledOnce<A extends unknown[], R> {
  /** The rows. */
  all(db: Executor, ...args: A): Promise<R[]>;
  /** The first row, or undefined (as `executeTakeFirst`). */
  first(db: Executor, ...args: A): Promise<R | undefined>;
}

/**
 * Kysely builds and compiles a query anew on every call: for a join with a handful of aliased columns that is
 * about 8 µs, more than SQLite takes to answer it. For the few queries every request runs (the token's owner,
 * a row by id), `compiledOnce` builds the query once per dialect with placeholders for its arguments and then
 * only swaps the values in.
 *
 * The arguments must be values that end up as query parameters (`where('id', '=', id)`), never something
 * that shapes the SQL (a column name, an `if` in the builder, a list whose length varies): the first call
 * throws if an argument does not appear as a parameter exactly once, or if the placeholder leaks into the text.
 */
export function compiledOnce<A extends unknown[], R>(
  build: (db: Kysely<Database>, ...args: A) => Compilable<R>,
): CompiledOnce<A, R> {
  const byDialect = new Map<boolean, CompiledQuery<R>>();
  let arity: number | undefined;
  const compiled = (db: Executor, given: number): CompiledQuery<R> => {
    arity ??= given;
    if (given !== arity) throw new Error(`compiledOnce: called with ${given} arguments, built with ${arity}`);
    const postgres = isPostgres(db);
    let query = byDialect.get(postgres);
    if (!query) {
      const slots = Array.from({ length: arity }, (_, i) => new Slot(i));
      query = build(db, ...(slots as unknown as A)).compile();
      for (const slot of slots) {
        if (query.parameters.filter((p) => p === slot).length !== 1)
          throw new Error(
            `compiledOnce: argument ${slot.index} is not used exactly once as a query parameter`,
          );
      }
      if (query.sql.includes('[object Object]'))
        throw new Error('compiledOnce: an argument leaked into the SQL');
      byDialect.set(postgres, query);
    }
    return query;
  };
  const run = async (db: Executor, args: A): Promise<R[]> => {
    const query = compiled(db, args.length);
    const parameters = query.parameters.map((p) => (p instanceof Slot ? args[p.index] : p));
    const result = await db.executeQuery<R>({ ...query, parameters });
    return result.rows;
  };
  return {
    all: (db, ...args) => run(db, args),
    first: async (db, ...args) => (await run(db, args))[0],
  };
}
