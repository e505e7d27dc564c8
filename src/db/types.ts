import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.ts';

/** What a repository function runs on: the database, or a transaction a service has opened. */
export type Executor = Kysely<Database> | Transaction<Database>;
